"""schemathesis hooks for ``tests/integration/test_openapi_truth.py`` (loaded with ``SCHEMATHESIS_HOOKS``).

Each changes a generated request only where the schema cannot say what the host needs, and keeps the request what
it was (schema-valid or not):

- a list ``cursor`` is opaque: only a value the host minted is valid (runs.md §List: any other is ``400``), and no
  schema can name those values. A schema-valid (positive) case is sent without one; negative cases keep theirs;
- a long poll's ``timeout`` and a stream's ``bufferMs`` are bounded to one second and none, so a generated request
  on a live run never holds a connection for a minute.
"""

from __future__ import annotations

from typing import Any

import schemathesis


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
