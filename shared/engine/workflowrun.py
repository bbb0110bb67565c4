"""The workflow run kind: a workflow run, and its replay and branch forks, advanced step by step from its folded
state.

``advance`` is one Advance task (``kernel.advance``, what the Step Functions task calls, hands a workflow run to
it). It takes steps from the run's stored state, appends their events transactionally in batches (each batch
also stores the new snapshot, conditioned on the last sequence and on the run still being writable), and returns
what the state machine does next: ``continue`` (loop), ``wait`` (a Wait state, for holds), ``park`` (an interrupt)
or ``done``. A retried task starts from the stored sequence, so nothing is appended twice; effects are keyed by
(run, node, ordinal) or (run, call key), so nothing fires twice either. A fork's first tasks copy its prefix
(``forkindex.copy_prefix``); a replay compares each event with its source's (``forkindex.reproduces``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from shared.engine import forkindex, spans
from shared.engine import state as st
from shared.engine.agents import invocation_step, started_payload
from shared.engine.canonical import same_json
from shared.engine.dispatch import decode_body
from shared.engine.forkindex import comparable, divergence, reproduces
from shared.engine.kernel import (
    ENGINE_VERSION,
    FLUSH_AT,
    TASK_EVENTS,
    EffectInFlightError,
    EngineError,
    claim_once,
    fail_obj,
    halt,
    load_state,
    make_event,
    resolve_agent,
    run_workflow,
    snapshot_updates,
)
from shared.engine.model_agent import ModelSession
from shared.engine.registry import MCP_CLIENT_NODE, NODE_TYPES, AgentSpec
from shared.engine.tools import Guard, ToolRuntime, ToolTally
from shared.engine.workflow import UnresolvedInputError, Workflow, resolve_node_inputs
from shared.errors import ConflictError, RunGoneError
from shared.ports import WRITABLE, EffectDeniedError, EgressRefusedError, Ports, RunRecord, TransportError
from shared.protocol import codes as c

SHORT_WAIT_MS = 1500
SOURCE_PAGE = 1000  # events per read of a replay's source (a task appends at most 2,000)
HOLD_MAX_MS = 60_000  # a conformance hold waits at most a minute (the fixtures document 1..60000 ms)


@dataclass
class Step:
    events: list[tuple[str, dict[str, Any], str | None]] = field(default_factory=list)
    wait_ms: int | None = None
    done: bool = False


@dataclass
class RunContext:
    ports: Ports
    record: RunRecord
    wf: Workflow
    mode: str  # live | replay | branch
    source_run_id: str | None = None
    source_outcomes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    source_calls: dict[tuple[str, int], dict[str, Any]] | None = None
    source_resolutions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    restart: bool = False  # a fork whose prefix ends inside a node: that node starts again
    source_digests: dict[str, Any] | None = None  # {key, events}: the replay's per-event digests of its source
    _source_cache: dict[int, dict[str, Any]] = field(default_factory=dict)
    _tools: ToolRuntime | None = None
    _models: ModelSession | None = None
    _agents: dict[str, AgentSpec | None] = field(default_factory=dict)
    tally: ToolTally | None = None  # the task's tool-call counts, when its handler asks for them

    @property
    def run_id(self) -> str:
        return self.record.run_id

    def tools(self) -> ToolRuntime:
        """The tool path for this task's steps (one catalog, so each registration is read once per task)."""
        if self._tools is None:
            self._tools = ToolRuntime(
                self.ports,
                self.run_id,
                self.record.tenant,
                self.mode,
                self.record.expires_at,
                self.ports.settings.run_tool_call_budget,
                self.source_calls,
                tally=self.tally,
            )
        return self._tools

    def models(self) -> ModelSession:
        """The model side of this task's steps: the run's model-call log, the source's log in a replay."""
        if self._models is None:
            ai = (self.record.data.get("configurable") or {}).get("ai")
            self._models = ModelSession(
                self.ports,
                self.run_id,
                self.record.tenant,
                self.mode,
                self.record.expires_at,
                ai,
                self.source_run_id if self.mode == "replay" else None,
                tally=self.tally,
            )
        return self._models

    def agent(self, nid: str, node: dict[str, Any]) -> AgentSpec | None:
        """The node's agent: the model-backed version the run pinned at create, or a built-in/scripted agent."""
        if nid not in self._agents:
            pinned = (self.record.data.get("agentPins") or {}).get(nid) or {}
            self._agents[nid] = resolve_agent(
                self.ports, self.record.tenant, node_agent_id(node), pinned.get("version")
            )
        return self._agents[nid]

    def source_event(self, seq: int, page: int = SOURCE_PAGE) -> dict[str, Any] | None:
        """The source's event at ``seq``. A replay asks in increasing order, so the source is read sequentially:
        one Query of at most ``page`` events from ``seq`` on (DynamoDB ``Limit``: nothing read is thrown
        away), the page replacing the last (bounded memory); a replay reads its source about once."""
        if self.source_run_id is None:
            return None
        if seq not in self._source_cache:
            got = self.ports.events.read_page(self.source_run_id, seq - 1, page)
            self._source_cache = {int(ev["sequence"]): ev for ev in got}
        return self._source_cache.get(seq)


def node_agent_id(node: dict[str, Any]) -> str:
    """The agent a ``core.agent`` node invokes: its AgentRef (``agent.agentId``), else ``config.agentId``."""
    return str((node.get("agent") or {}).get("agentId") or (node.get("config") or {}).get("agentId") or "")


def build_context(ports: Ports, rec: RunRecord) -> RunContext:
    wf = run_workflow(ports, rec)
    fork = rec.data.get("fork") or {}
    ctx = RunContext(ports, rec, wf, str(fork.get("mode", "live")), fork.get("sourceRunId"))
    if fork and forkindex.needs_index(rec):
        src = forkindex.load(ports, rec.run_id)
        ctx.source_outcomes = src.get("outcomes", {})
        ctx.source_resolutions = src.get("resolutions", {})
        ctx.source_digests = src.get("digests")
        if ctx.mode == "replay":
            ctx.source_calls = {(r["invocationId"], int(r["index"])): r for r in src.get("calls", [])}
    return ctx


# --------------------------------------------------------------------------- steps


def _node_ev(t: str, nid: str, **payload: Any) -> tuple[str, dict[str, Any], str | None]:
    return (t, {"nodeId": nid, **payload}, nid)


def next_step(ctx: RunContext, state: dict[str, Any]) -> Step:
    rec = ctx.record
    now = ctx.ports.clock.now_ms()
    restart, ctx.restart = ctx.restart, False  # only the first step after the prefix copy
    if state["status"] == "pending":
        payload: dict[str, Any] = {
            "workflowId": ctx.wf.id,
            "inputs": rec.data.get("inputs", {}),
            "transport": "rest",
            "engineVersion": ENGINE_VERSION,
            "owner": rec.data["owner"],
        }
        for k in ("tags", "metadata"):
            if rec.data.get(k) is not None:
                payload[k] = rec.data[k]
        return Step([(c.RUN_STARTED, payload, None)])
    if state["status"] in c.TERMINAL_STATUSES:
        return Step(done=True)
    active = state.get("active")
    # A fork's clock starts when the fork does: a prefix recorded long ago must not time the child out.
    began = max(int(state.get("startedAtMs") or 0), int((rec.data.get("fork") or {}).get("startedAtMs", 0)))
    if ctx.wf.timeout_ms and began and now - began > ctx.wf.timeout_ms:
        evs = []
        if active:
            evs.append(_node_ev(c.NODE_CANCELLED, active["nodeId"], reason="run-timeout"))
        evs.append((c.RUN_FAILED, {"error": fail_obj(c.RUN_TIMEOUT, "the run exceeded settings.timeout")}, None))
        return Step(evs, done=True)
    if state.get("failure"):
        f = state["failure"]
        err = f.get("error") or fail_obj(c.NODE_EXECUTION_FAILED, "a node failed")
        return Step([(c.RUN_FAILED, {"error": err, "failedNodeId": f["nodeId"]}, None)], done=True)
    if state.get("skips"):
        return Step([_node_ev(c.NODE_SKIPPED, state["skips"][0], reason="trigger rule not satisfied")])
    if active and restart:
        return _restart(ctx, state, active["nodeId"])
    if active:
        return _continue(ctx, state, active, now)
    if state["ready"]:
        return _start(ctx, state, state["ready"][0])
    outputs = {
        n: v["outputs"]
        for n, v in state["nodes"].items()
        if v["status"] == "completed" and not any(not e.back for e in ctx.wf.out_edges.get(n, ()))
    }
    return Step([(c.RUN_COMPLETED, {"outputs": outputs}, None)], done=True)


def _hold_delay(inputs: dict[str, Any]) -> int:
    d = inputs.get("delayMs", 0)
    if not isinstance(d, int | float) or isinstance(d, bool) or d < 0:
        return 0
    return int(min(d, HOLD_MAX_MS))


def _start(ctx: RunContext, state: dict[str, Any], nid: str) -> Step:
    node = ctx.wf.nodes[nid]
    type_id = node["typeId"]
    nt = NODE_TYPES[type_id]
    ordinal = int(state["nodes"][nid]["visits"]) + 1
    started = _node_ev(c.NODE_STARTED, nid, typeId=type_id, attempt=0)
    try:
        inputs = _inputs(state, node)
    except UnresolvedInputError as exc:
        return Step([started, _node_ev(c.NODE_FAILED, nid, error=fail_obj(c.NODE_EXECUTION_FAILED, str(exc)))])
    if ctx.mode == "replay" and nt.role == "side-effect":
        # (sourceRunId, nodeId, n): n = 1 + this node's terminal outcomes so far, inherited prefix included.
        n = int(state["nodes"][nid]["terminals"]) + 1
        recorded = ctx.source_outcomes.get(nid, [])
        if len(recorded) >= n:
            o = recorded[n - 1]
            again = _negotiations(nid, o.get("negotiations") or [])  # as recorded, `at` included
            if o["type"] == c.NODE_COMPLETED:
                return Step([started, *again, _node_ev(c.NODE_COMPLETED, nid, outputs=o.get("outputs", {}))])
            return Step([started, *again, _node_ev(c.NODE_FAILED, nid, error=o.get("error"))])
        return Step(
            [
                started,
                _node_ev(
                    c.NODE_FAILED,
                    nid,
                    error=fail_obj(
                        c.REPLAY_SOURCE_MISSING, "the source run has no recorded outcome for this execution"
                    ),
                ),
            ]
        )
    if type_id == "core.conformance.hold":
        return Step([started])
    if type_id == "core.approvalGate":
        events = [started, _interrupt_requested(ctx, nid, node, ordinal)]
        if ctx.mode == "replay":
            # A resolution is fixed history: the n-th execution takes the source's n-th, never asks again.
            n = int(state["nodes"][nid].get("resolutions", 0)) + 1
            recorded = ctx.source_resolutions.get(nid, [])
            if len(recorded) >= n:
                events.append(
                    _node_ev(c.INTERRUPT_RESOLVED, nid, **{k: v for k, v in recorded[n - 1].items() if k != "nodeId"})
                )
        return Step(events)
    if type_id == "core.agent":
        inv = f"{nid}:{ordinal}"
        payload = started_payload(
            ctx.agent(nid, node),
            node_agent_id(node),
            inv,
            "workflow-node",
            (ctx.record.data.get("configurable") or {}).get("ai"),
        )
        channel = ((ctx.record.data.get("agentPins") or {}).get(nid) or {}).get("channel")
        if channel is not None and "resolvedAgentVersion" in payload:
            payload["resolvedChannel"] = channel
        return Step([started, (c.AGENT_INVOCATION_STARTED, payload, None)])
    guard = Guard(ctx.mode)
    negotiated: list[dict[str, Any]] = []  # the MCP negotiations of this execution, emitted before its outcome
    try:
        outputs = _execute_once(ctx, guard, nid, node, inputs, ordinal, negotiated)
    except EffectDeniedError:
        return Step(
            [
                started,
                _node_ev(
                    c.NODE_FAILED,
                    nid,
                    error=fail_obj(c.REPLAY_SOURCE_MISSING, "an effect seam refused an effect in replay"),
                ),
            ]
        )
    except NodeFailure as exc:
        return Step(
            [
                started,
                *_negotiations(nid, negotiated),
                _node_ev(c.NODE_FAILED, nid, error=fail_obj(exc.code, exc.message)),
            ]
        )
    return Step([started, *_negotiations(nid, negotiated), _node_ev(c.NODE_COMPLETED, nid, outputs=outputs)])


def _negotiations(nid: str, payloads: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], str | None]]:
    return [(c.NEGOTIATION_DECIDED, p, nid) for p in payloads]


def _inputs(state: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """The node's resolved inputs; a connection reads the upstream node's latest completed outputs."""
    nodes = state["nodes"]
    # Only the nodes a connection names (not every node's outputs, which made a long chain quadratic).
    named = {
        b["nodeId"]
        for b in (node.get("inputs") or {}).values()
        if isinstance(b, dict) and b.get("type") == "connection" and isinstance(b.get("nodeId"), str)
    }
    outputs = {k: nodes[k]["outputs"] for k in named if k in nodes and nodes[k].get("outputs") is not None}
    return resolve_node_inputs(node, state["variables"], outputs)


APPROVAL_ACTIONS = ("accept", "reject")


def _origin(ctx: RunContext) -> str:
    """The run a chain of forks started from: what a replay must reproduce is named after it."""
    return str(ctx.record.data.get("originRunId") or ctx.record.run_id)


def interrupt_id(ctx: RunContext, nid: str, ordinal: int) -> str:
    """Deterministic per (origin run, node, execution): a replay of a fork reproduces its source's ids."""
    import hashlib

    origin = _origin(ctx)
    digest = hashlib.sha256(f"{origin}\n{nid}\n{ordinal}".encode()).hexdigest()[:32]
    return f"{ctx.record.tenant}/i-{digest}"


def _interrupt_requested(
    ctx: RunContext, nid: str, node: dict[str, Any], ordinal: int
) -> tuple[str, dict[str, Any], str | None]:
    """The approval InterruptPayload (interrupt.md §Payload) plus the engine's identity fields."""
    cfg = node.get("config") or {}
    actions = [a for a in (cfg.get("actions") or APPROVAL_ACTIONS) if a in APPROVAL_ACTIONS] or list(APPROVAL_ACTIONS)
    data: dict[str, Any] = {
        "artifactId": f"{_origin(ctx)}#{nid}",
        "artifactType": "workflow-step",
        "title": str(cfg.get("title") or node.get("name") or nid),
        "actions": actions,
    }
    approvers = cfg.get("approversList")
    if isinstance(approvers, list) and approvers:
        data["approversList"] = [str(a) for a in approvers]
    return _node_ev(
        c.INTERRUPT_REQUESTED,
        nid,
        interruptId=interrupt_id(ctx, nid, ordinal),
        kind="approval",
        key=f"{nid}#{ordinal}",
        data=data,
    )


class NodeFailure(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _execute_once(
    ctx: RunContext,
    guard: Guard,
    nid: str,
    node: dict[str, Any],
    inputs: dict[str, Any],
    ordinal: int,
    negotiated: list[dict[str, Any]],
) -> dict[str, Any]:
    type_id = node["typeId"]
    cfg = node.get("config") or {}
    if type_id == "core.noop":
        return {}
    if type_id == "core.conformance.side-effect":
        guard.check("storage.effect-ledger")
        rec = ctx.record
        effect_id = f"{rec.run_id}#{nid}#{ordinal}"
        # The effect: one ledger row, written only while the run is writable (ConflictError otherwise).
        ctx.ports.host.put_effect(
            f"LEDGER#{rec.tenant}",
            f"{rec.run_id}#{nid}#{ordinal:06d}",
            {"runId": rec.run_id, "nodeId": nid, "ordinal": ordinal, "at": ctx.ports.clock.iso()},
            run_id=rec.run_id,
            expires_at=rec.expires_at,
        )
        return {"effectId": effect_id, "ordinal": ordinal}
    if type_id == "core.tool":
        tool = str(cfg.get("tool", ""))
        agent = AgentSpec(f"node:{nid}", tool_allowlist=None)
        out = ctx.tools().call(
            agent=agent,
            invocation_id=f"{nid}:{ordinal}",
            order_key=f"N{nid}:{ordinal:06d}",
            index=0,
            tool=tool,
            args=inputs,
            calls_so_far=0,
        )
        if out.negotiation is not None:
            negotiated.append(out.negotiation)
        if out.status != "ok":
            err = out.error or fail_obj(c.EXTERNAL_CALL_FAILED, "tool call failed")
            raise NodeFailure(str(err.get("code", c.EXTERNAL_CALL_FAILED)), str(err.get("message", "tool failed")))
        return {"result": out.result}
    if type_id == "core.http":
        return _http(ctx, guard, cfg, inputs, f"{nid}#{ordinal:06d}")
    if type_id == MCP_CLIENT_NODE:
        return _mcp_client(ctx, guard, nid, ordinal, negotiated)
    raise NodeFailure(c.NODE_EXECUTION_FAILED, "node type cannot run here")


def _mcp_client(
    ctx: RunContext, guard: Guard, nid: str, ordinal: int, negotiated: list[dict[str, Any]]
) -> dict[str, Any]:
    """The ``conformance-mcp-client`` fixture's node: ``ctx.mcp.<method>`` with the run's inputs, its resolved value
    verbatim as ``outputs.result`` (``shared.engine.mcpclient``)."""
    from shared.engine import mcpclient
    from shared.engine.dispatch import idempotency_key

    guard.check("tool.mcp")
    rec = ctx.record
    effect_key = f"{nid}#{ordinal:06d}"

    def claim() -> None:  # a tools/call goes out only while the run is writable, from the delivery holding it
        claim_once(ctx.ports, ctx.run_id, effect_key, {"seam": "tool.mcp", "nodeId": nid}, rec.expires_at)

    try:
        result = mcpclient.invoke(
            ctx.ports,
            rec.tenant,
            dict(rec.data.get("inputs") or {}),
            idempotency_key=idempotency_key(ctx.run_id, effect_key),
            claim=claim,
            negotiated=negotiated,
        )
    except mcpclient.Rejected as exc:
        raise NodeFailure(exc.code, exc.message) from exc
    return {"result": result}


def _http(
    ctx: RunContext, guard: Guard, cfg: dict[str, Any], inputs: dict[str, Any], effect_key: str
) -> dict[str, Any]:
    from urllib.parse import urlsplit

    url = str(cfg.get("url") or inputs.get("url") or "")
    method = str(cfg.get("method") or inputs.get("method") or "GET").upper()
    parts = urlsplit(url)
    # The operator's allowlist, and a destination a seams-profile exercise named for this run (seams.py)
    allow = (*ctx.ports.settings.http_allowlist, *(ctx.record.data.get("httpAllow") or ()))
    host = (parts.hostname or "").lower()
    port = parts.port
    target = f"{host}:{port}" if port else host
    if parts.scheme not in ("http", "https") or not host or (target not in allow and host not in allow):
        raise NodeFailure(c.EXTERNAL_CALL_FAILED, "the URL's host is not on the host's HTTP allowlist")
    guard.check("http.fetch")
    # The request goes out only if the run is writable at this instant (ConflictError otherwise), and only from the
    # one delivery holding its claim (EffectInFlightError in another: the same work delivered twice fires it once).
    claim_once(
        ctx.ports, ctx.run_id, effect_key, {"seam": "http.fetch", "method": method, "url": url}, ctx.record.expires_at
    )
    body = inputs.get("body")
    try:
        reply = ctx.ports.http.send(
            method,
            url,
            {"Content-Type": "application/json", "Accept": "application/json"},
            None if body is None else json.dumps(body).encode("utf-8"),
            timeout_s=float(cfg.get("timeoutSeconds", 10)),
            max_bytes=int(ctx.ports.settings.tool_response_max_bytes),
        )
    except (EgressRefusedError, TransportError) as exc:
        raise NodeFailure(c.EXTERNAL_CALL_FAILED, f"the HTTP request failed: {exc.reason}") from exc
    if reply.status >= 400:
        raise NodeFailure(c.EXTERNAL_CALL_FAILED, f"the HTTP request answered {reply.status}")
    return {"status": reply.status, "body": decode_body(reply.body)}


def _continue(ctx: RunContext, state: dict[str, Any], active: dict[str, Any], now: int) -> Step:
    nid = active["nodeId"]
    node = ctx.wf.nodes[nid]
    type_id = node["typeId"]
    try:
        inputs = _inputs(state, node)
    except UnresolvedInputError as exc:
        return Step([_node_ev(c.NODE_FAILED, nid, error=fail_obj(c.NODE_EXECUTION_FAILED, str(exc)))])
    if type_id == "core.conformance.hold":
        until = int(active["startedAtMs"]) + _hold_delay(inputs)
        if now >= until:
            return Step([_node_ev(c.NODE_COMPLETED, nid, outputs=inputs)])
        return Step(wait_ms=until - now)
    if type_id == "core.approvalGate":
        pending = active.get("interrupt")
        if pending is None:  # a crash between node.started and interrupt.requested (two transactions)
            return Step([_interrupt_requested(ctx, nid, node, int(state["nodes"][nid]["visits"]))])
        resolved = pending.get("resolved")
        if resolved is None:
            raise EngineError("an unresolved interrupt in a running run")
        if resolved.get("decision") == "rejected":
            return Step(
                [
                    _node_ev(
                        c.NODE_FAILED,
                        nid,
                        error={"code": c.APPROVAL_REJECTED, "message": "the approval was rejected", "retryable": False},
                    )
                ]
            )
        return Step(
            [
                _node_ev(
                    c.NODE_COMPLETED, nid, outputs={k: resolved.get(k) for k in ("action", "decision", "resumeValue")}
                )
            ]
        )
    if type_id == "core.agent":
        agent = ctx.agent(nid, node)
        progress = active.get("agent")
        if agent is None or progress is None:
            return Step([_node_ev(c.NODE_FAILED, nid, error=fail_obj(c.NODE_EXECUTION_FAILED, "unknown agent"))])
        agent_input = inputs.get("input", inputs)
        turn = invocation_step(
            agent,
            agent_input,
            progress,
            ctx.tools(),
            int(state["toolCalls"]),
            ctx.models() if agent.kind == "model" else None,
        )
        out: list[tuple[str, dict[str, Any], str | None]] = [(t, p, None) for t, p in turn.events]
        if turn.error is not None:
            out.append(_node_ev(c.NODE_FAILED, nid, error=turn.error))
        elif turn.finished:
            out.append(_node_ev(c.NODE_COMPLETED, nid, outputs={"decision": progress.get("decision")}))
        return Step(out)
    # A single-shot node left active by a crash between two transactions of one step: run it again with the
    # same ordinal, without a second node.started.
    step = _restart(ctx, state, nid)
    return Step(step.events[1:], step.wait_ms, step.done)


def _restart(ctx: RunContext, state: dict[str, Any], nid: str) -> Step:
    """The active node's execution from its node.started on, with the same ordinal (its visit already counted).

    A fork whose ``fromSeq`` falls inside a node emits all of it: the event at ``fromSeq`` is a fresh
    node.started, which the fold reads as a restart of the same execution (replay.md §Endpoint: events from
    ``fromSeq`` on are re-executed).
    """
    st_ = state["nodes"][nid]
    st_["visits"] -= 1
    try:
        return _start(ctx, state, nid)
    finally:
        st_["visits"] += 1


# --------------------------------------------------------------------------- events and the loop


def _divergence(ctx: RunContext, state: dict[str, Any], ev: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    if ctx.mode != "replay" or state.get("diverged") or ctx.source_run_id is None:
        return None
    seq = int(ev["sequence"]) - int(state.get("inserted", 0))
    if ctx.source_digests is not None:  # compare digests; read the source event only at a mismatch
        same, src = reproduces(ctx.ports, ctx.source_digests, ctx.source_run_id, seq, ev, ctx.run_id)
        if same:
            return None
    else:  # an index built before digests were stored: compare with the source's events
        src = ctx.source_event(seq)
        if src is not None and same_json(comparable(src), comparable(ev)):
            return None
    return c.REPLAY_DIVERGED, divergence(ctx.source_run_id, ev, src)


def _terminal_updates(ports: Ports, state: dict[str, Any], last_event: dict[str, Any]) -> dict[str, Any]:
    upd: dict[str, Any] = {"status": state["status"]}
    if state["status"] in c.TERMINAL_STATUSES:
        upd["completedAt"] = last_event["timestamp"]
        if state["status"] == "failed":
            upd["error"] = (last_event.get("payload") or {}).get("error")
    return upd


def advance(
    ports: Ports, rec: RunRecord, *, max_events: int = TASK_EVENTS, max_ms: int = 60_000, tally: ToolTally | None = None
) -> dict[str, Any]:
    """One Advance task of the writable workflow run ``rec``: steps until it parks, ends or waits long, or the task
    has appended ``max_events`` events or spent ``max_ms``; a fork's first tasks copy its prefix instead."""
    run_id = rec.run_id
    fork = rec.data.get("fork") or {}
    ctx = build_context(ports, rec)
    ctx.tally = tally
    if fork and rec.last_seq < int(fork.get("fromSeq", 0)) - 1:
        return forkindex.copy_prefix(ports, rec, ctx.wf)
    state = load_state(ports, rec, ctx.wf)
    inputs = rec.data.get("inputs")
    # Right after the prefix copy, a node the prefix left in flight is restarted, never resumed mid-way.
    ctx.restart = bool(fork) and int(fork.get("fromSeq", 0)) > 0 and rec.last_seq == int(fork["fromSeq"]) - 1
    began = ports.clock.now_ms()
    buffer: list[dict[str, Any]] = []
    next_seq = rec.last_seq + 1
    wrote = 0

    deferred = False  # the state was not stored by an append of this task: the task's last write stores it
    stored_seq = int((rec.state or {}).get("seq", -1))  # the stored snapshot's seq
    stored_status = rec.status  # the run item's: an append names the status only when it changes it (and the index)

    def behind(events: list[dict[str, Any]]) -> int | None:
        """Estimated bytes of the log after the stored snapshot up to the last of ``events`` (their mean size times
        the count); None (store it) once terminal or with nothing to measure. Once per task: its last append."""
        if state["status"] in c.TERMINAL_STATUSES or not events:
            return None
        size = sum(len(json.dumps(e, separators=(",", ":"))) for e in events)
        return (int(events[-1]["sequence"]) - stored_seq) * size // len(events)

    def flush(final: bool = True) -> None:
        nonlocal buffer, next_seq, wrote, deferred, stored_seq, stored_status
        if not buffer:
            if final and deferred:
                updates = snapshot_updates(ports, run_id, state, next_seq - 1, inputs)
                if updates:
                    ports.events.append_events(
                        run_id, next_seq, [], require_status=WRITABLE, expires_at=rec.expires_at, run_updates=updates
                    )
                    stored_seq = next_seq - 1
                deferred = False
            return
        last = int(buffer[-1]["sequence"])
        updates = snapshot_updates(ports, run_id, state, last, inputs, behind_bytes=behind(buffer)) if final else {}
        deferred = "state" not in updates
        updates.update(_terminal_updates(ports, state, buffer[-1]))
        if updates["status"] == stored_status:
            del updates["status"]
        if rec.started_at is None and state["status"] != "pending":
            updates["startedAt"] = (
                next(e["timestamp"] for e in buffer if e["type"] == c.RUN_STARTED)
                if any(e["type"] == c.RUN_STARTED for e in buffer)
                else buffer[0]["timestamp"]
            )
            rec.started_at = updates["startedAt"]
        ports.events.append_events(
            run_id, next_seq, buffer, run_updates=updates, require_status=WRITABLE, expires_at=rec.expires_at
        )
        if "state" in updates:
            stored_seq = last
        stored_status = updates.get("status", stored_status)
        next_seq += len(buffer)
        wrote += len(buffer)
        buffer = []

    try:
        while True:
            with ports.tracing.span(spans.STEP_SPAN) as span:
                active = (state.get("active") or {}).get("nodeId")
                step = next_step(ctx, state)
                spans.name_step(span, step.events, step.wait_ms is not None, ctx.wf.nodes, active)
                for t, payload, node_id in step.events:
                    ev = make_event(ports, run_id, next_seq + len(buffer), t, payload, node_id)
                    st.apply(state, ev, ctx.wf)
                    buffer.append(ev)
                    div = _divergence(ctx, state, ev)
                    if div is not None:
                        span.set(spans.DIVERGED, True)  # replay.md §7: the diverging step's span says so
                        span.set(spans.DIVERGED_SEQ, int(ev["sequence"]))
                        dev = make_event(ports, run_id, next_seq + len(buffer), div[0], div[1], None)
                        dev["causationId"] = ev["eventId"]
                        st.apply(state, dev, ctx.wf)
                        buffer.append(dev)
                    if len(buffer) >= FLUSH_AT:
                        flush(final=False)
            if state["status"] in c.PARKED_STATUSES:  # an interrupt was requested: wait on a task token
                flush()
                return {"runId": run_id, "next": "park", "waitSeconds": 0}
            if step.done or state["status"] in c.TERMINAL_STATUSES:
                flush()
                return {"runId": run_id, "next": "done", "waitSeconds": 0}
            if step.wait_ms is not None:
                flush(final=step.wait_ms > SHORT_WAIT_MS)
                if step.wait_ms <= SHORT_WAIT_MS:
                    ports.clock.sleep(step.wait_ms / 1000)
                    fresh = ports.runs.get_run(run_id)  # a cancel, pause or erasure may have landed meanwhile
                    if fresh is None or fresh.status not in WRITABLE:
                        return halt(run_id, fresh)
                    continue
                return {"runId": run_id, "next": "wait", "waitSeconds": max(1, math.floor(step.wait_ms / 1000))}
            if wrote + len(buffer) >= max_events or ports.clock.now_ms() - began >= max_ms:
                flush()
                return {"runId": run_id, "next": "continue", "waitSeconds": 0}
    except EffectInFlightError as exc:
        # Another delivery of this work holds an effect's claim: nothing of ours is written; look again later (that
        # delivery has usually finished the run by then; if it died, its claim is taken over once it is stale).
        return {"runId": run_id, "next": "wait", "waitSeconds": exc.wait_s}
    except (ConflictError, RunGoneError):
        # Cancelled, paused, erased, or another writer moved the log: nothing of ours is half-written.
        fresh = ports.runs.get_run(run_id)
        if fresh is None or fresh.status not in WRITABLE:
            return halt(run_id, fresh)
        return {"runId": run_id, "next": "continue", "waitSeconds": 0}
