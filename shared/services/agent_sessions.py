"""Sessions of external agents (decision 0143): a production run of an agent whose code runs elsewhere and reaches
the host through its gateway.

``POST /host/openwop-serverless/agents/{agentId}/sessions`` resolves the version like a run's pin (an exact
``version``, a ``channel``, else what ``stable`` serves once the agent has deployments), refuses a ``host`` agent
(``409 openwop-serverless.agent_runtime_mismatch``), and only then writes: a run of kind ``session`` whose log opens
with ``run.started {inputs: {"input": ...}}`` and ``agent.invocation-started {invocationId: "s:0", ...}``, and its
expiry execution (the timer state machine's, decision 0189: at ``expiresAt`` the run fails ``session_expired`` unless
it has ended). ``POST /host/openwop-serverless/runs/{runId}/session`` answers the same fields again for a session
that still runs (the token re-derived, never stored).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shared.engine.recorded import SESSION_WORKFLOW  # the run.started workflowId of a session (never registered)
from shared.errors import (
    NotFoundError,
    ProtocolError,
    RunGoneError,
    RunTerminalError,
    ServiceUnavailableError,
    fault,
    invalid,
)
from shared.ports import Ports, RunRecord
from shared.protocol import codes as c
from shared.protocol.ids import project_id
from shared.services import agent_versions as av
from shared.services.common import Caller, load_own_run
from shared.services.gateway import session as gw
from shared.services.run_start import expires_at, new_run_id, run_span, stamped, traced

if TYPE_CHECKING:
    from shared.protocol.agents import SessionRequest

GATEWAY_PREFIX = "/host/openwop-serverless/gateway/"
_STARTED_SEQ = 1  # the sequence of a session's agent.invocation-started: its calls' order key


class AgentRuntimeMismatchError(ProtocolError):
    code = c.AGENT_RUNTIME_MISMATCH
    default_message = "A session is for an agent version whose runtime is external."


def runtime_kind(doc: dict[str, Any]) -> str:
    return str((doc.get("runtime") or {}).get("kind") or "host")


def resolve_version(ports: Ports, tenant: str, agent_id: str, version: str | None, channel: str | None) -> str:
    """The version a session runs: 404 for an unknown agent or version (another tenant's too)."""
    from shared.services.deployments import default_version, resolve_channel

    if version is not None and channel is not None:
        raise invalid("Name a version or a channel, not both.", [fault("/channel", "oneOf")])
    if not av.rows(ports, tenant, agent_id):
        raise NotFoundError("No such agent.")
    if version is not None:
        if not av.exists(ports, tenant, agent_id, version):
            raise NotFoundError("The agent has no such version.")
        return version
    got = resolve_channel(ports, tenant, agent_id, channel) if channel is not None else None
    got = got or default_version(ports, tenant, agent_id)
    if got is None:
        raise NotFoundError("No such agent.")
    return got


def gateway_root(ports: Ports, origin: str, run_id: str) -> str:
    base = ports.settings.gateway_url or origin.rstrip("/")
    return f"{base}{GATEWAY_PREFIX}{project_id(run_id)}"


def fields(ports: Ports, rec: RunRecord, origin: str) -> dict[str, Any]:
    """What a driver of the session needs: its token and its gateway's URLs."""
    facts = gw.session_facts(rec)
    if facts is None:
        raise AgentRuntimeMismatchError("This run is not a session of an external agent.")
    root = gateway_root(ports, origin, rec.run_id)
    return {
        "runId": rec.run_id,
        "sessionId": rec.run_id,
        "token": gw.token_for(ports, rec.run_id, str(facts["nonce"])),
        "mcpUrl": f"{root}/mcp",
        "openaiBaseUrl": f"{root}/v1",
        "completeUrl": f"{root}/complete",
        "expiresAt": ports.clock.iso(int(facts["expiresAtMs"])),
        "resolvedAgentVersion": str(facts["agentVersion"]),
    }


def create_session(
    ports: Ports, caller: Caller, agent_id: str, body: SessionRequest, origin: str
) -> tuple[int, dict[str, Any]]:
    from shared.engine.registry import agent_from_version

    version = resolve_version(ports, caller.tenant, agent_id, body.version, body.channel)
    doc = ports.agents.get_version(caller.tenant, agent_id, version)
    if doc is None:
        raise NotFoundError("The agent has no such version.")
    if runtime_kind(doc) != "external":
        raise AgentRuntimeMismatchError("This agent version runs on the host: start it with POST /runs.")
    agent = agent_from_version(doc)
    from shared.services.quotas import check_run_start

    check_run_start(ports, caller.tenant)  # a session is a run start (the quota is off unless it is set)
    run_id = new_run_id(ports, caller.tenant)
    now_ms = ports.clock.now_ms()
    expires_ms = now_ms + int(ports.settings.session_ttl_s) * 1000
    facts = {
        "nonce": ports.ids.token(24),
        "agentId": agent_id,
        "agentVersion": version,
        "invocationId": gw.SESSION_INVOCATION,
        "orderKey": f"{_STARTED_SEQ:012d}",
        "expiresAtMs": expires_ms,
    }
    data: dict[str, Any] = {
        "kind": gw.SESSION_KIND,
        "workflowId": SESSION_WORKFLOW,
        "inputs": {"input": body.input},
        "owner": caller.owner,
        "agentId": agent_id,
        "agentVersion": version,
        "session": facts,
    }
    if body.channel is not None:
        data["agentChannel"] = body.channel
    with run_span(ports, run_id, caller.tenant, data):
        rec = _start(ports, caller, run_id, data, agent, body.channel)
    return 201, fields(ports, rec, origin)


def fork_session(ports: Ports, caller: Caller, src: RunRecord, mode: str, from_seq: int) -> dict[str, Any]:
    """``POST /runs/{runId}:fork`` of a session: a new session of the same agent version and input, awaiting its
    driver (``POST /runs/{forkId}/session``). The agent runs again from its start, so a session forks at 0 only.
    In ``replay`` every tool and model call is served from the source's record; a ``branch`` goes live again."""
    from shared.engine.registry import agent_from_version

    if from_seq != 0:
        raise invalid("A session forks from its start: fromSeq is 0.", [fault("/fromSeq", "const")])
    facts = gw.session_facts(src)
    if facts is None:
        raise AgentRuntimeMismatchError("This run is not a session of an external agent.")
    doc = ports.agents.get_version(src.tenant, str(facts["agentId"]), str(facts["agentVersion"]))
    if doc is None:
        raise NotFoundError("No such run.")
    run_id = new_run_id(ports, caller.tenant)
    expires_ms = ports.clock.now_ms() + int(ports.settings.session_ttl_s) * 1000
    data: dict[str, Any] = {
        k: v for k, v in src.data.items() if k in ("kind", "workflowId", "inputs", "agentId", "agentVersion")
    }
    data["owner"] = caller.owner
    data["session"] = {**facts, "nonce": ports.ids.token(24), "expiresAtMs": expires_ms}
    data["parentRunId"] = src.run_id
    data["originRunId"] = src.data.get("originRunId") or src.run_id
    data["fork"] = {"mode": mode, "sourceRunId": src.run_id, "fromSeq": 0, "startedAtMs": ports.clock.now_ms()}
    with run_span(ports, run_id, caller.tenant, data):
        _start(ports, caller, run_id, data, agent_from_version(doc), None, parent=src.run_id)
    return {"runId": run_id, "sourceRunId": src.run_id, "fromSeq": 0, "mode": mode, "status": "running"}


def _start(
    ports: Ports,
    caller: Caller,
    run_id: str,
    data: dict[str, Any],
    agent: Any,
    channel: str | None,
    *,
    parent: str | None = None,
) -> RunRecord:
    from shared.engine import kernel
    from shared.engine import state as st
    from shared.engine.agents import started_payload
    from shared.engine.version import ENGINE_VERSION
    from shared.services import start_outbox as outbox

    rec = RunRecord(
        run_id=run_id,
        tenant=caller.tenant,
        status="running",
        last_seq=-1,
        created_at=ports.clock.iso(),
        data=traced(ports, stamped(ports, data)),
        state=st.new_state(),
        expires_at=expires_at(ports),
        **outbox.first_execution(ports, "timer", run_id),  # decisions 0173, 0175, 0189
    )

    # ready once its first events are stored: a session cut before them is failed by the sweep (decision 0150)
    pending, marker = outbox.begin(ports, run_id, "timer", rec.expires_at, ready=False)
    try:  # a fork with its lineage link, in one transaction: the source's erasure reaches it
        ports.runs.create_run(rec, parent=parent, staged=[marker])
    except RunGoneError as exc:
        raise NotFoundError("No such run.") from exc  # the source is being erased
    started = {
        "workflowId": SESSION_WORKFLOW,
        "inputs": data["inputs"],
        "transport": "rest",
        "engineVersion": ENGINE_VERSION,
        "owner": caller.owner,
    }
    invoked = started_payload(agent, str(data["agentId"]), gw.SESSION_INVOCATION, "run-api", None)
    if channel is not None:
        invoked["resolvedChannel"] = channel
    events = [
        kernel.make_event(ports, run_id, seq, t, p, None)
        for seq, (t, p) in enumerate(((c.RUN_STARTED, started), (c.AGENT_INVOCATION_STARTED, invoked)))
    ]
    try:
        state = st.fold(events, None)
        updates = kernel.state_updates(ports, rec, state, len(events) - 1)
        updates["startedAt"] = events[0]["timestamp"]
        ports.events.append_events(
            run_id, 0, events, run_updates=updates, require_status=("running",), expires_at=rec.expires_at
        )
        outbox.ready(ports, pending, rec.expires_at)
        expiry = outbox.session_expiry(ports, run_id, int(data["session"]["expiresAtMs"]))
        outbox.started(ports, rec, ports.orchestrator.start("timer", run_id, expiry))
    except Exception as exc:
        from shared.services.erasure import erase_now

        erase_now(ports, run_id, tombstone=False)
        outbox.done(ports, run_id)
        raise ServiceUnavailableError() from exc
    outbox.done(ports, run_id)
    return ports.runs.get_run(run_id) or rec


def session_of_run(ports: Ports, caller: Caller, wire_run_id: str, origin: str) -> dict[str, Any]:
    """``POST /runs/{runId}/session``: the same fields as a new session, for a session that still runs."""
    rec = load_own_run(ports, caller, wire_run_id)
    if gw.session_facts(rec) is None:
        raise AgentRuntimeMismatchError("This run is not a session of an external agent.")
    if rec.terminal:
        raise RunTerminalError("The session has ended.")
    if ports.clock.now_ms() >= int(rec.data["session"]["expiresAtMs"]):
        gw.expire(ports, rec.run_id)
        raise RunTerminalError("The session has expired.")
    return {**fields(ports, rec, origin), "input": (rec.data.get("inputs") or {}).get("input")}
