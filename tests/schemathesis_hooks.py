"""schemathesis hooks for ``tests/integration/test_openapi_truth.py`` (loaded with ``SCHEMATHESIS_HOOKS``).

Each changes a generated request only where the schema cannot say what the host needs, and keeps the request what
it was (schema-valid or not):

- a list ``cursor`` is opaque: only a value the host minted is valid (runs.md §List: any other is ``400``), and no
  schema can name those values. A schema-valid (positive) case is sent without one; negative cases keep theirs;
- a long poll's ``timeout`` and a stream's ``bufferMs`` are bounded to one second and none, so a generated request
  on a live run never holds a connection for a minute.

And one guard of the interpreter: CPython 3.11's ``ast.parse`` keeps its AST-construction recursion depth in state
shared by every thread (python/cpython gh-106905), so two of schemathesis' ``--workers`` threads parsing at once (its
hypothesis describes lambdas by parsing their source) can fail with ``SystemError: AST constructor recursion depth
mismatch``. This process parses one source at a time.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

import schemathesis

_parse, _parsing = ast.parse, threading.Lock()


def _parse_one_at_a_time(*args: Any, **kwargs: Any) -> Any:
    with _parsing:
        return _parse(*args, **kwargs)


ast.parse = _parse_one_at_a_time  # type: ignore[assignment]


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: Any) -> None:
    query = case.query if isinstance(case.query, dict) else None
    if query is None:
        return
    if case.meta is not None and case.meta.generation.mode.is_positive:
        query.pop("cursor", None)
    if isinstance(query.get("timeout"), int) and query["timeout"] > 1:
        query["timeout"] = 1
    if isinstance(query.get("bufferMs"), int) and query["bufferMs"] > 0:
        query["bufferMs"] = 0
