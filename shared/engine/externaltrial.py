"""Eval trials of an external agent (decision 0143): the agent runs elsewhere and reaches the host only through the
gateway, whose tool and model calls are recorded under the trial's order key exactly as a host agent's are.

A trial is **opened** (its ``TWAIT#`` item: the nonce its gateway token is derived from, when it expires, and for a
harness-driven trial the task token its Map item waits on), then **ended** by the agent's outcome (``complete``
through the gateway, or the endpoint's answer), then **scored** from what the gateway recorded: the same events,
calls, fixture misses and grade a host agent's trial gets (``evaltrial.grade``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from shared import keys
from shared.engine.agents import completed_event, started_payload, tool_events
from shared.engine.dispatch import credential_headers
from shared.engine.evaltrial import TrialResult, grade, invocation_id, order_key
from shared.engine.model_agent import ModelSession, usage_payload
from shared.engine.registry import AgentSpec
from shared.engine.tools import ToolRuntime, outcome_of
from shared.ports import EgressRefusedError, Ports, RunRecord, SecretNotFoundError, TransportError
from shared.protocol import codes as c

WAITING, ENDED = "waiting", "ended"
EXPIRED = "session_expired"  # the reason a trial whose agent never completed fails with
AGENT_FAILED = "agent_failed"  # the reason a trial whose agent reported a failure fails with
_GATEWAY_ID = re.compile(r"^(?P<run>.+)\.t(?P<task>\d{1,6})\.(?P<trial>\d{1,4})$")
_TOKEN = re.compile(r"owg_[A-Za-z0-9_-]{16,}")  # a gateway token an agent's own message might quote
REDACTED = "owg_[redacted]"


def wait_sk(task_index: int, trial: int) -> str:
    return f"{keys.TRIAL_WAIT_PREFIX}{task_index:05d}#{trial:03d}"


def counter_sk(task_index: int, trial: int) -> str:
    """The item whose counters order the trial's gateway calls (apart from ``TWAIT#``, which a retry rewrites)."""
    return f"{keys.TRIAL_COUNT_PREFIX}{task_index:05d}#{trial:03d}"


def gateway_id(run_id: str, task_index: int, trial: int) -> str:
    """The gateway id of one trial: ``<evalRunId>.t<taskIndex>.<trial>``."""
    return f"{run_id}.t{task_index}.{trial}"


def parse_gateway_id(value: str) -> tuple[str, int, int] | None:
    """(eval run id, task index, trial) of a trial's gateway id; None for any other id."""
    m = _GATEWAY_ID.match(value)
    return (m["run"], int(m["task"]), int(m["trial"])) if m else None


def open_trial(
    ports: Ports, rec: RunRecord, plan: dict[str, Any], task_index: int, trial: int, ttl_s: int, task_token: str = ""
) -> dict[str, Any]:
    """Write (or, on a retry, refresh) the trial's ``TWAIT#`` item; its document. A retry keeps the nonce, so a
    token already handed out stays valid, and takes the new task token."""
    sk = wait_sk(task_index, trial)
    doc = ports.runs.get_aux(rec.run_id, sk) or {
        "taskIndex": task_index,
        "trial": trial,
        "taskId": str(plan["suite"]["tasks"][task_index]["taskId"]),
        "nonce": ports.ids.token(16),
        "status": WAITING,
        "expiresAtMs": ports.clock.now_ms() + ttl_s * 1000,
    }
    if task_token:
        doc = {**doc, "taskToken": task_token, "harness": True}
    ports.runs.put_aux(rec.run_id, sk, doc, rec.expires_at)
    return doc


def trial_state(ports: Ports, run_id: str, task_index: int, trial: int) -> dict[str, Any] | None:
    return ports.runs.get_aux(run_id, wait_sk(task_index, trial))


def waiting(ports: Ports, run_id: str) -> list[dict[str, Any]]:
    """The harness-driven trials of the run still waiting for their agent, in suite order."""
    return [
        doc
        for _sk, doc in ports.runs.query_aux(run_id, keys.TRIAL_WAIT_PREFIX)
        if doc.get("status") == WAITING and doc.get("harness")
    ]


def end_trial(ports: Ports, rec: RunRecord, doc: dict[str, Any], outcome: dict[str, Any]) -> dict[str, Any]:
    """Store the agent's outcome (``{"output"}`` or ``{"error": {"message"}}``) on a waiting trial; the ended
    document (its ``taskToken`` is what to resume). A token the message quotes is not stored."""
    error = outcome.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        outcome = {**outcome, "error": {**error, "message": _TOKEN.sub(REDACTED, error["message"])}}
    ended = {**doc, "status": ENDED, "outcome": outcome}
    ports.runs.put_aux(rec.run_id, wait_sk(int(doc["taskIndex"]), int(doc["trial"])), ended, rec.expires_at)
    return ended


def score_trial(
    ports: Ports,
    rec: RunRecord,
    plan: dict[str, Any],
    task_index: int,
    trial: int,
    agent: AgentSpec,
    outcome: dict[str, Any] | None,
) -> TrialResult:
    """The trial's result from what the gateway recorded under its order key and the agent's ``outcome`` (None:
    the agent never ended it), graded as a host agent's trial is."""
    task = plan["suite"]["tasks"][task_index]
    task_id = str(task["taskId"])
    inv, order = invocation_id(task_id, trial), order_key(task_index, trial)
    overrides = (rec.data.get("configurable") or {}).get("ai")
    result = TrialResult(task_index, trial, task_id)
    now = ports.clock.iso()
    drafts = [(c.AGENT_INVOCATION_STARTED, started_payload(agent, agent.agent_id, inv, "run-api", overrides))]
    records = ports.tool_calls.list_calls(rec.run_id, between=(f"{order}#", f"{order}#~"))
    for record in records:
        out = outcome_of(record)
        drafts += tool_events(agent, record.call_id, record.tool_name, record.args, out)
        result.calls.append({"tool": record.tool_name, "args": record.args})
        result.latency_ms += int(out.duration_ms or 0)
        result.fixture_miss_count += int(out.miss)
    models = ModelSession(ports, rec.run_id, rec.tenant, "live", rec.expires_at, overrides)
    for _turn, entry in sorted(models.log(inv).items()):
        usage = usage_payload(entry)
        drafts.append((c.PROVIDER_USAGE, usage))
        result.input_tokens += usage["inputTokens"]
        result.output_tokens += usage["outputTokens"]
        result.latency_ms += int(entry.get("durationMs") or 0)
        if usage.get("costEstimateUsd") is not None:
            result.cost_usd = (result.cost_usd or 0.0) + float(usage["costEstimateUsd"])
    if outcome is not None and "output" in outcome:
        result.decided, result.decision = True, outcome["output"]
        drafts.append((c.AGENT_DECIDED, {"agentId": agent.agent_id, "decision": result.decision}))
        drafts.append(completed_event(agent, inv))
    else:
        message = str(((outcome or {}).get("error") or {}).get("message") or "the agent did not complete the trial")
        message = _TOKEN.sub(REDACTED, message)  # the reason is reported: never a token in it
        result.error = {"code": AGENT_FAILED if outcome is not None else EXPIRED, "message": message}
        drafts.append(completed_event(agent, inv, "failed"))
    result.events = [{"type": t, "payload": p, "timestamp": now} for t, p in drafts]
    tools = ToolRuntime(ports, rec.run_id, rec.tenant, "live", rec.expires_at, int(ports.settings.run_tool_call_budget))
    grade(ports, rec, plan, task_index, trial, result, agent, tools, models)
    return result


# --------------------------------------------------------------------------- the eval Map's tasks

Issue = Callable[[str, str, int], dict[str, Any]]
"""(gateway id, nonce, expiresAtMs) -> the gateway fields a driver needs: ``token``, ``mcpUrl``, ``openaiBaseUrl``,
``expiresAt`` (the services derive the token; the engine never holds the key it is derived from)."""


def harness_items(ports: Ports, agent: AgentSpec | None, listed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Map items of an eval run: an external agent without an endpoint waits for its driver (``x``), at most
    the session TTL (``ttl``, the WaitAgent state's timeout)."""
    if agent is None or not agent.external or (agent.runtime or {}).get("endpoint"):
        return listed
    ttl = int(ports.settings.session_ttl_s)
    return [{**item, "x": "wait", "ttl": ttl} for item in listed]


def wait_task(ports: Ports, rec: RunRecord, plan: dict[str, Any], task_index: int, trial: int, task_token: str) -> None:
    """The WaitAgent state's task: open the trial for its driver with the token the Map item waits on. A retry
    whose trial the driver already ended lets the item go on at once."""
    doc = open_trial(ports, rec, plan, task_index, trial, int(ports.settings.session_ttl_s), task_token)
    if doc.get("status") == ENDED:
        ports.orchestrator.resume(task_token)


def close_trial(
    ports: Ports, rec: RunRecord, plan: dict[str, Any], task_index: int, trial: int, agent: AgentSpec
) -> TrialResult:
    """The Score state's task: the trial's outcome as its driver left it (none when it expired), scored. A trial
    still open is closed first, so its gateway refuses every later call."""
    doc = trial_state(ports, rec.run_id, task_index, trial)
    outcome = (doc or {}).get("outcome")
    if doc is not None and doc.get("status") == WAITING:
        end_trial(ports, rec, doc, {"error": {"message": "the agent did not complete the trial in time"}})
    return score_trial(ports, rec, plan, task_index, trial, agent, outcome)


def endpoint_trial(
    ports: Ports, rec: RunRecord, plan: dict[str, Any], task_index: int, trial: int, agent: AgentSpec, issue: Issue
) -> TrialResult:
    """A trial of an external agent with an endpoint: the host calls it once (egress-guarded, with its credential
    and ``timeoutMs``) with ``{input, taskId, trial, mcpUrl, openaiBaseUrl, token, deadline}`` and expects
    ``{"output"}``; a timeout, a refusal, a non-JSON answer or a non-2xx fails this trial only, with its reason.
    A retry of a trial whose endpoint already answered never calls it again."""
    endpoint = dict((agent.runtime or {}).get("endpoint") or {})
    timeout_ms = int(endpoint.get("timeoutMs") or 60_000)
    doc = open_trial(ports, rec, plan, task_index, trial, timeout_ms // 1000 + 60)
    if doc.get("status") == ENDED:  # a retried task whose endpoint already answered: score that answer again
        return score_trial(ports, rec, plan, task_index, trial, agent, doc.get("outcome"))
    task = plan["suite"]["tasks"][task_index]
    try:
        fields = issue(gateway_id(rec.run_id, task_index, trial), str(doc["nonce"]), int(doc["expiresAtMs"]))
    except LookupError as exc:
        outcome: dict[str, Any] = {"error": {"message": f"the trial's gateway cannot be reached: {exc}"}}
        end_trial(ports, rec, doc, outcome)
        return score_trial(ports, rec, plan, task_index, trial, agent, outcome)
    body = {
        "input": task.get("input"),
        "taskId": str(task["taskId"]),
        "trial": trial,
        "mcpUrl": fields["mcpUrl"],
        "openaiBaseUrl": fields["openaiBaseUrl"],
        "token": fields["token"],
        "deadline": ports.clock.iso(ports.clock.now_ms() + timeout_ms),
    }
    outcome = _call_endpoint(ports, rec.tenant, endpoint, body, timeout_ms)
    end_trial(ports, rec, doc, outcome)
    return score_trial(ports, rec, plan, task_index, trial, agent, outcome)


def _call_endpoint(
    ports: Ports, tenant: str, endpoint: dict[str, Any], body: dict[str, Any], timeout_ms: int
) -> dict[str, Any]:
    try:
        headers = credential_headers(ports, tenant, endpoint.get("credentialRef"))
    except (SecretNotFoundError, LookupError, ValueError, TypeError):
        return {"error": {"message": "the endpoint's credential is not available"}}
    headers = {**headers, "Content-Type": "application/json", "Accept": "application/json"}
    try:
        reply = ports.http.send(
            "POST",
            str(endpoint["url"]),
            headers,
            json.dumps(body, separators=(",", ":")).encode(),
            timeout_s=timeout_ms / 1000,
            max_bytes=int(ports.settings.tool_response_max_bytes),
        )
    except EgressRefusedError as exc:
        return {"error": {"message": f"egress refused: {exc.reason}"}}
    except TransportError as exc:
        return {"error": {"message": f"the endpoint call failed ({exc.reason})"}}
    if not 200 <= reply.status < 300:
        return {"error": {"message": f"the endpoint answered HTTP {reply.status}"}}
    try:
        answer = json.loads(reply.body)
    except ValueError:
        return {"error": {"message": "the endpoint's answer is not JSON"}}
    if not isinstance(answer, dict) or "output" not in answer:
        return {"error": {"message": "the endpoint's answer has no output"}}
    return {"output": answer["output"]}
