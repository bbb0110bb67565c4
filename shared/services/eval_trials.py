"""``GET /host/openwop-serverless/runs/{runId}/trials?status=waiting``: an eval run's trials that wait for their
driver (an external agent without an endpoint, decision 0143), each with what the driver needs to run it: the
task's input, the trial's gateway token and URLs, and when it expires.

The token is derived again at every listing (never stored): only the tenant that owns the run can list it, and a
trial's token opens only that trial's gateway, only while it waits. Paged in suite order with the signed cursor
of decision 0006 (``limit`` 1..200, default 50).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shared.errors import NotFoundError, fault, invalid
from shared.ports import Ports, RunRecord
from shared.protocol.ids import project_id
from shared.services.common import Caller
from shared.services.cursors import mint_cursor, page_start

MAX_LIMIT, DEFAULT_LIMIT = 200, 50
_CURSOR = frozenset({"after"})


def _fields(ports: Ports, run_id: str, task_index: int, trial: int, nonce: str, expires_ms: int, base: str) -> dict:
    from shared.engine import externaltrial as xt
    from shared.services.agent_sessions import GATEWAY_PREFIX
    from shared.services.gateway.session import token_for

    root = f"{base}{GATEWAY_PREFIX}{xt.gateway_id(project_id(run_id), task_index, trial)}"
    return {
        "runId": run_id,
        "trial": trial,
        "token": token_for(ports, xt.gateway_id(run_id, task_index, trial), nonce),
        "mcpUrl": f"{root}/mcp",
        "openaiBaseUrl": f"{root}/v1",
        "completeUrl": f"{root}/complete",
        "expiresAt": ports.clock.iso(expires_ms),
    }


def trial_fields(ports: Ports, rec: RunRecord, doc: dict[str, Any], origin: str) -> dict[str, Any]:
    """The gateway fields of one open trial (the same names as a session's)."""
    base = ports.settings.gateway_url or origin.rstrip("/")
    fields = _fields(
        ports, rec.run_id, int(doc["taskIndex"]), int(doc["trial"]), str(doc["nonce"]), int(doc["expiresAtMs"]), base
    )
    return {**fields, "taskId": doc["taskId"]}


def issuer(ports: Ports) -> Callable[[str, str, int], dict[str, Any]]:
    """What an endpoint trial hands its agent (``externaltrial.Issue``): the trial's fields under the host's
    ``GATEWAY_URL`` (a task has no request to take an origin from). ``LookupError`` when it is not set."""
    from shared.engine import externaltrial as xt

    def issue(gateway_id: str, nonce: str, expires_ms: int) -> dict[str, Any]:
        parsed = xt.parse_gateway_id(gateway_id)
        if parsed is None or not ports.settings.gateway_url:
            raise LookupError("the host's GATEWAY_URL is not set")
        run_id, task_index, trial = parsed
        return _fields(ports, run_id, task_index, trial, nonce, expires_ms, ports.settings.gateway_url)

    return issue


def waiting_trials(
    ports: Ports, caller: Caller, wire_run_id: str, params: dict[str, str], origin: str
) -> dict[str, Any]:
    from shared.engine import externaltrial as xt
    from shared.engine.evalplan import load_plan
    from shared.services.eval_report import own_run_or_404

    for name in params:
        if name not in ("status", "limit", "cursor"):
            raise invalid(f"Unknown query parameter {name}.", [fault(f"/{name}", "additionalProperties")])
    if params.get("status", "waiting") != "waiting":
        raise invalid("status is waiting (the only listing of trials).", [fault("/status", "enum")])
    raw_limit = params.get("limit", str(DEFAULT_LIMIT))
    if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= MAX_LIMIT:
        raise invalid(f"limit is 1..{MAX_LIMIT}.", [fault("/limit", "maximum")])
    limit = int(raw_limit)
    rec = own_run_or_404(ports, caller, wire_run_id)
    if rec.kind != "eval":
        raise NotFoundError("The run is not an eval run.")
    start = page_start(ports, caller.tenant, params, _CURSOR)
    after = (start or {}).get("after", "")
    if rec.terminal:
        return {"trials": [], "nextCursor": None}
    now = ports.clock.now_ms()
    open_ = [d for d in xt.waiting(ports, rec.run_id) if int(d["expiresAtMs"]) > now]
    open_ = [d for d in open_ if xt.wait_sk(int(d["taskIndex"]), int(d["trial"])) > after]
    page, more = open_[:limit], len(open_) > limit
    tasks = load_plan(ports, rec.run_id)["suite"]["tasks"] if page else []
    trials = [{**trial_fields(ports, rec, d, origin), "input": tasks[int(d["taskIndex"])].get("input")} for d in page]
    cursor = None
    if more:
        last = page[-1]
        cursor = mint_cursor(ports, caller.tenant, {"after": xt.wait_sk(int(last["taskIndex"]), int(last["trial"]))})
    return {"trials": trials, "nextCursor": cursor}
