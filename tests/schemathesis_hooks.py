"""schemathesis hooks for ``tests/integration/test_openapi_truth.py`` (loaded with ``SCHEMATHESIS_HOOKS``).

Each changes a generated request only where the schema cannot say what the host needs, and keeps the request what
it was (schema-valid or not):

- a list ``cursor`` is opaque: only a value the host minted is valid (runs.md §List: any other is ``400``), and no
  schema can name those values. A schema-valid (positive) case is sent without one; negative cases keep theirs;
- a long poll's ``timeout`` and a stream's ``bufferMs`` are bounded to one second and none, so a generated request
  on a live run never holds a connection for a minute.

And one guard of the interpreter: CPython 3.11 keeps its AST-construction recursion depth in state shared by every
thread (python/cpython gh-106905), so two of schemathesis' ``--workers`` threads building or reading an AST at once
(its hypothesis describes lambdas by parsing their source) can fail with ``SystemError: AST constructor recursion
depth mismatch``. Every such ``compile`` goes through the builtin (``ast.parse`` calls it, and so does a module that
imported ``parse`` before this one loaded), so this process runs them one at a time.
"""

from __future__ import annotations

import ast
import builtins
import threading
from typing import Any

import schemathesis

_compile, _compiling = builtins.compile, threading.Lock()


def _ast_one_at_a_time(source: Any, *args: Any, **kwargs: Any) -> Any:
    flags = kwargs.get("flags", args[2] if len(args) > 2 else 0)
    if isinstance(source, ast.AST) or flags & ast.PyCF_ONLY_AST:
        with _compiling:
            return _compile(source, *args, **kwargs)
    return _compile(source, *args, **kwargs)


builtins.compile = _ast_one_at_a_time


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
