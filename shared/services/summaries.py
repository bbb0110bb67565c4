"""Reading an eval run's summary (kept apart from eval creation so the read handler's import stays lean)."""

from __future__ import annotations

from typing import Any

from shared.caches import LockedLRUCache
from shared.errors import NotFoundError, RunStateConflictError
from shared.ports import Ports, RunRecord
from shared.services.common import Caller, load_own_run


def _features() -> dict[str, bool]:
    from shared.services import discovery

    return discovery.FEATURES


# Large summaries read by this container, by their S3 key: a terminal run's summary object is written once (a
# retried Finish writes the same bytes) and its key names the run, so a reader that has just read the run item
# that names it may reuse it (the eval report's pages read it once, decision 0126).
_SUMMARY_CACHE_SIZE = 4
_summary_cache: LockedLRUCache[str, dict[str, Any]] = LockedLRUCache(maxsize=_SUMMARY_CACHE_SIZE)


def stored(ports: Ports, rec: RunRecord, *, cached: bool = False) -> dict[str, Any] | None:
    """The eval run's stored summary: on the run item, or the S3 object it names when large; None when it has
    none (or its object is gone with an erasure). ``cached``: a terminal run's object read before by this
    container is not read again (never cached while the run is not terminal)."""
    s = rec.summary
    if not s or "$ref" not in s:
        return s
    key = str(s["$ref"])
    hit = _summary_cache.get(key) if cached and rec.terminal else None
    if hit is not None:
        return hit
    got = ports.blobs.get_json(key)
    if got is None:
        return None
    if cached and rec.terminal:
        _summary_cache[key] = dict(got)
    return dict(got)


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
