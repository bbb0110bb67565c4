"""Reading an eval run's summary (kept apart from eval creation so the read handler's import stays lean)."""

from __future__ import annotations

from typing import Any

from shared.errors import NotFoundError, RunStateConflictError
from shared.ports import Ports, RunRecord
from shared.services.common import Caller, load_own_run


def _features() -> dict[str, bool]:
    from shared.services import discovery

    return discovery.FEATURES


def stored(ports: Ports, rec: RunRecord) -> dict[str, Any] | None:
    """The eval run's stored summary: on the run item, or the S3 object it names when large; None when it has
    none (or its object is gone with an erasure)."""
    s = rec.summary
    if not s or "$ref" not in s:
        return s
    got = ports.blobs.get_json(str(s["$ref"]))
    return dict(got) if got is not None else None


def eval_summary(ports: Ports, caller: Caller, wire_run_id: str) -> dict[str, Any]:
    """GET /runs/{runId}/eval-summary: 200 summary; 409 while not terminal; 404 for a non-eval run or a
    terminal run without a summary; another tenant's id 403 (the path rule)."""
    rec = load_own_run(ports, caller, wire_run_id)
    if not _features().get("evalSuite") or rec.kind != "eval":
        raise NotFoundError("The run is not an eval run.")
    if not rec.terminal:
        raise RunStateConflictError("The eval run has not finished.", {"runStatus": rec.status})
    summary = stored(ports, rec)
    if not summary:
        raise NotFoundError("The eval run has no summary.")
    return summary
