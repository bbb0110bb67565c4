"""``GET /host/openwop-serverless/eval-runs``: the tenant's eval runs, newest first, by suite, agent and name.

One row per eval run: its suite and agent (with the versions it pinned), its experiment name
(``configurable.extensions["openwop-serverless"].name``), status, aggregate score and verdict. It reads the
tenant index as ``GET /runs`` does (the filters are attributes an eval run's item carries,
``schema.EVAL_INDEX_ATTRIBUTES``) with the same signed cursor; never a scan
(docs/decisions/0118-named-experiments.md).

Query: ``suite`` (a suiteId), ``agent`` (an agentId), ``name``, ``status``, ``limit`` (1..100, default 50),
``cursor``. A filter longer than 128 characters or an unknown parameter is ``400 validation_error``.
"""

from __future__ import annotations

from typing import Any

from shared.errors import ValidationError, fault, invalid
from shared.ports import Ports, RunRecord
from shared.protocol.codes import RUN_STATUSES
from shared.services import summaries
from shared.services.common import Caller, page_limit
from shared.services.cursors import mint_cursor
from shared.services.runs import read_list_cursor

DEFAULT_PAGE, MAX_PAGE = 50, 100
FILTERS = {"suite": "suiteId", "agent": "agentId", "name": "name", "status": "status"}
MAX_FILTER = 128


def verdict(rec: RunRecord, summary: dict[str, Any] | None) -> str | None:
    """What an eval run says: None while it runs; ``unverifiable`` for a failed or cancelled run or a fixture miss;
    the paired verdict against its baseline when it has one; else ``passed`` / ``failed``."""
    if not rec.terminal:
        return None
    if rec.status != "completed" or not summary:
        return "unverifiable"
    if any(int(t.get("fixtureMissCount", 0)) for t in summary.get("tasks") or []):
        return "unverifiable"
    regression = summary.get("regression") or {}
    if regression.get("verdict"):
        return str(regression["verdict"])
    return "passed" if summary.get("passed") else "failed"


def row(ports: Ports, rec: RunRecord) -> dict[str, Any]:
    d = rec.data
    summary = summaries.stored(ports, rec) if rec.summary else None
    out: dict[str, Any] = {
        "runId": rec.run_id,
        "suiteId": d.get("suiteId"),
        "suiteVersion": d.get("suiteVersion"),
        "agentId": d.get("agentId"),
        "agentVersion": d.get("agentVersion"),
        "name": d.get("name"),
        "status": rec.status,
        "aggregateScore": summary.get("aggregateScore") if summary else None,
        "verdict": verdict(rec, summary),
        "baselineRunId": d.get("baselineRunId"),
        "createdAt": rec.created_at,
        "startedAt": rec.started_at,
        "completedAt": rec.completed_at,
    }
    return {k: v for k, v in out.items() if v is not None}


def list_eval_runs(ports: Ports, caller: Caller, params: dict[str, str]) -> dict[str, Any]:
    unknown = set(params) - set(FILTERS) - {"limit", "cursor"}
    if unknown:
        raise invalid(
            "Unknown query parameter.",
            [
                fault("", "additionalProperties", "This host does not read this parameter here.", parameter=name)
                for name in sorted(unknown)[:1]
            ],
        )
    filters: dict[str, str] = {}
    for param, attr in FILTERS.items():
        value = params.get(param)
        if value is None:
            continue
        if not 0 < len(value) <= MAX_FILTER:
            raise ValidationError(f"{param} is 1..{MAX_FILTER} characters.")
        if param == "status" and value not in RUN_STATUSES:
            raise ValidationError("status is not a run status.")
        filters[attr] = value
    limit = page_limit(params, DEFAULT_PAGE, MAX_PAGE)
    start = read_list_cursor(ports, caller.tenant, params["cursor"]) if "cursor" in params else None
    page = ports.runs.list_runs(caller.tenant, limit, start, filters, evals=True)
    body: dict[str, Any] = {"evalRuns": [row(ports, r) for r in page.runs]}
    if page.next_key:
        body["nextCursor"] = mint_cursor(ports, caller.tenant, page.next_key)
    return body
