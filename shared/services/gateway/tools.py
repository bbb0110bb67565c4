"""The tool gateway's logic (decision 0143, "The tool gateway"), free of the MCP SDK: what ``tools/list`` lists and
what one ``tools/call`` answers, as plain JSON (``functions.agent_gateway.mcp`` puts it on the wire).

- ``list_tools``: exactly the version's ``toolAllowlist``, each with its catalog description and input schema
  (``{"type": "object"}`` when it has none, as ``ModelSession.surface`` does). It writes nothing.
- ``call_tool``: through ``ToolRuntime.call``, unchanged in its decisions, as a host-run agent's call: the index is
  an ordinal of the run (a terminal run never sends), the record goes to the tool-call store under
  ``key_of_call(order_key, index)`` (what ``:from-runs``, ``fixtureRuns`` and the viewer read), and
  ``agent.tool-called`` / ``agent.tool-returned`` (``agents.tool_events``) go on the run's log. A session's call
  writes twice at most (decision 0149, ``_session_call``): the ordinal with the effect's intent before the tool
  runs, the record with the events after; an eval trial's claims its ordinal on the trial's item first.
  - PRODUCTION: live through the registered HTTP or MCP tool (egress guard, credentials, idempotency key,
    timeouts).
  - EVAL: served from the trial's ``FixturePlan``; which entries earlier calls took is read back from the trial's
    records (the plan is replayed over them in index order), so each request decides as one host-run trial would.
  - REPLAY: the source run's call at the same ordinal when tool and args are equal, else the first source call
    with equal tool and args that no earlier call of the fork was served from: arrival order is not part of a
    session's record.
  A miss in EVAL or REPLAY never calls a tool: ``isError: true`` with ``structuredContent: {code, message, tool,
  closest, differingPointers, wouldMatchWith?}``.

The answer is a ``CallToolResult``: a registered MCP tool's passes through unaltered (RFC 0204); any other result is
``structuredContent`` (a JSON object; any other value only as text) plus its JSON text in ``content``; an error is
``isError: true`` with the error object as ``structuredContent``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from shared.caches import LockedLRUCache
from shared.engine.agents import tool_events
from shared.engine.canonical import same_json
from shared.engine.catalog import Catalog
from shared.engine.evalplan import load_plan
from shared.engine.evalsources import fixture_plan
from shared.engine.matching import closest, would_match
from shared.engine.tools import FIXTURE_MISS, FixturePlan, ToolOutcome, ToolRuntime, key_of_call
from shared.errors import ConflictError, OrdinalTakenError, RunTerminalError, ServiceUnavailableError
from shared.ports import Ports, RunRecord, ToolCallRecord
from shared.protocol import codes as c
from shared.providers.names import ToolNames
from shared.services.gateway import EVAL, REPLAY, GatewaySession
from shared.services.gateway import session as sessions

LAST_INDEX = 99_999  # ``key_of_call`` pads the index to 5 digits: a session's calls lie between index 0 and this
# A session's tool registrations are read at most once this long per warm process, as a host-run agent's task reads
# them once (a task lasts at most 60 s): a registration changed or deleted reaches a session's calls within it.
CATALOG_S = 60.0
_CATALOGS: LockedLRUCache[tuple[str, str], tuple[int, Catalog]] = LockedLRUCache(maxsize=1024)


def _catalog(ports: Ports, session: GatewaySession) -> Catalog:
    """The session's catalog (its tenant's tool registrations, each read when first resolved), kept ``CATALOG_S``
    (by the clock: one that went back does not extend it) for the session's next requests."""
    key, now = (session.tenant, session.run_id), ports.clock.now_ms()
    kept = _CATALOGS.get(key)
    if kept is not None and 0 <= now - kept[0] < CATALOG_S * 1000:
        return kept[1]
    catalog = Catalog(ports, session.tenant)
    _CATALOGS[key] = (now, catalog)
    return catalog


def _names(session: GatewaySession) -> ToolNames:
    """Catalog ids (``acme.crm:lookup``) do not fit the model providers' tool-name grammar, and an agent hands its MCP
    tools to its model by name: so the gateway lists each tool under its wire-safe name (``shared.providers.names``,
    the name a host-run agent's model sees) and maps a call's name back to the catalog id it records."""
    return ToolNames(session.agent.tool_allowlist or ())


def list_tools(ports: Ports, session: GatewaySession) -> list[dict[str, Any]]:
    """``tools/list``: the version's allowlist, in its order, under wire-safe names. Reads the catalog, writes
    nothing."""
    catalog = _catalog(ports, session)
    names = _names(session)
    out = []
    for tool in session.agent.tool_allowlist or ():
        resolved = catalog.resolve(tool)
        schema = (resolved.input_schema if resolved is not None else None) or {"type": "object"}
        desc = (resolved.description if resolved is not None else None) or tool
        out.append({"name": names.to_wire(tool), "description": desc, "inputSchema": schema})
    return out


def call_tool(ports: Ports, session: GatewaySession, name: str, arguments: Any) -> dict[str, Any]:
    """``tools/call``: one call decided, recorded and logged as a host-run agent's; a ``CallToolResult`` as JSON.
    A tool outside the allowlist is decided ``forbidden`` by the runtime, recorded and logged, and never called."""
    agent = session.agent
    name = _names(session).to_catalog(name)
    if session.mode == EVAL:
        out, runtime, source = _trial_call(ports, session, name, arguments)
    else:
        out, runtime, source = _session_call(ports, session, name, arguments)
    code = (out.error or {}).get("code") if out.status == "error" else None
    if session.mode == REPLAY and code == c.REPLAY_SOURCE_MISSING:
        miss = _miss(c.REPLAY_SOURCE_MISSING, "no recorded call in the source run matches this call", name)
        return _missed(miss, name, arguments, source, agent.content_free)
    if out.miss and runtime.plan is not None:
        miss = _miss(FIXTURE_MISS, "no fixture matches this call", name)
        return _missed(miss, name, arguments, runtime.plan.entries, agent.content_free)
    return _result(out)


def _runtime(ports: Ports, session: GatewaySession, rec: RunRecord | None, **kw: Any) -> ToolRuntime:
    mode = "replay" if session.mode == REPLAY else "live"
    budget = int(ports.settings.run_tool_call_budget)
    expires_at = rec.expires_at if rec else 0
    return ToolRuntime(
        ports, session.run_id, session.tenant, mode, expires_at, budget, catalog=_catalog(ports, session), **kw
    )


def _call(runtime: ToolRuntime, session: GatewaySession, index: int, name: str, arguments: Any) -> ToolOutcome:
    return runtime.call(
        agent=session.agent,
        invocation_id=session.invocation_id,
        order_key=session.order_key,
        index=index,
        tool=name,
        args=arguments,
        calls_so_far=index,
    )


def _trial_call(
    ports: Ports, session: GatewaySession, name: str, arguments: Any
) -> tuple[ToolOutcome, ToolRuntime, list[dict[str, Any]]]:
    """An eval trial's call: its ordinal claimed on the trial's item, its record written by the runtime; its events
    are made from the records when the trial is scored."""
    index = sessions.claim(ports, session, "toolCalls")
    # its retention (the record's TTL, fixed at creation) and its plan: as authentication read it
    rec = session.run if session.run is not None else ports.runs.get_run(session.run_id)
    runtime = _runtime(ports, session, rec)
    runtime.plan = _trial_plan(ports, session, rec)
    return _call(runtime, session, index, name, arguments), runtime, []


@dataclass
class _Ordinal:
    """A session call's ordinal, claimed with the intent of the call's outside effect (``ToolRuntime.claimer``)."""

    ports: Ports
    run_id: str
    index: int
    ttl: int
    claimed: bool = False

    def __call__(self, key: str | None, intent: dict[str, Any] | None) -> bool:
        effect = (key, intent, self.ttl) if key is not None and intent is not None else None
        try:
            self.ports.runs.claim_ordinal(
                self.run_id, sessions.TOOL_CALLS, self.index, require_status=("running",), effect=effect
            )
        except OrdinalTakenError:
            raise  # decided again at the next ordinal: nothing was written or sent
        except ConflictError as exc:
            raise RunTerminalError("The session has ended.") from exc
        self.claimed = True
        return True


def _session_call(
    ports: Ports, session: GatewaySession, name: str, arguments: Any
) -> tuple[ToolOutcome, ToolRuntime, list[dict[str, Any]]]:
    """A session's (or a replay fork's) call in at most two writes (decision 0149). Its ordinal is the run's next
    as authentication read it, taken in the call's first write: a call that performs an outside effect claims the
    ordinal and the effect's intent in one conditional write before it sends (``claimer``), and its record and its
    events are the second; any other call (decided without an effect: forbidden, over budget, invalid, served from
    the record) claims the ordinal with its record and events, in one. A lost race for the ordinal decides again at
    the next one (nothing was written or sent); a lost race for the log's head appends again."""
    agent = session.agent
    rec = session.run if session.run is not None else ports.runs.get_run(session.run_id)
    for _ in range(sessions.ATTEMPTS):
        if rec is None or rec.status != "running":
            raise RunTerminalError("The session has ended.")
        index = rec.counters.get(sessions.TOOL_CALLS, 0)
        ordinal = _Ordinal(ports, session.run_id, index, rec.expires_at)
        runtime = _runtime(ports, session, rec, deferred=[], defer_claimed=True, claimer=ordinal)
        source: list[dict[str, Any]] = []
        if session.mode == REPLAY:
            served, source = _replay_source(ports, session, index, name, arguments)
            runtime.source_calls = {(session.invocation_id, index): served} if served is not None else {}
        try:
            out = _call(runtime, session, index, name, arguments)
            events = tool_events(agent, f"{session.invocation_id}#{index}", name, arguments, out)
            _record(ports, session, rec, runtime, events, None if ordinal.claimed else (sessions.TOOL_CALLS, index))
        except OrdinalTakenError:
            rec = ports.runs.get_run(session.run_id)  # another call took this ordinal first: decide at the next
            continue
        return out, runtime, source
    raise ServiceUnavailableError()


def _record(
    ports: Ports,
    session: GatewaySession,
    rec: RunRecord,
    runtime: ToolRuntime,
    events: list[tuple[str, dict[str, Any]]],
    claim: tuple[str, int] | None,
) -> None:
    """The call's record and its events in one write (and its ordinal, unless its intent claimed it). A call that
    performed its effect keeps its record if the session ended meanwhile (the record is what happened)."""
    records = list(runtime.deferred or [])
    staged = [ports.tool_calls.stage_call(r, rec.expires_at) for r in records]
    try:
        sessions.append(ports, session.run_id, events, rec=rec, staged=staged, claim=claim)
    except RunTerminalError:
        if claim is None:
            for r in records:
                ports.tool_calls.put_call(r, rec.expires_at)
        raise


def _earlier(ports: Ports, session: GatewaySession, index: int) -> list[ToolCallRecord]:
    """This invocation's recorded calls before ``index``, in index order."""
    low, high = key_of_call(session.order_key, 0), key_of_call(session.order_key, LAST_INDEX)
    calls = ports.tool_calls.list_calls(session.run_id, between=(low, high))
    return [
        r
        for r in calls
        if r.invocation_id == session.invocation_id and r.call_key < key_of_call(session.order_key, index)
    ]


# --------------------------------------------------------------------------- REPLAY


def _as_source(rec: ToolCallRecord) -> dict[str, Any]:
    """A source call as ``ToolRuntime``'s replay path reads it (``forkindex``'s shape)."""
    return {
        "invocationId": rec.invocation_id,
        "toolName": rec.tool_name,
        "args": rec.args,
        "status": rec.status,
        "result": rec.result,
        "error": rec.error,
        "durationMs": rec.duration_ms,
        "miss": bool(rec.extra.get("miss")),
        "transport": rec.extra.get("transport"),
        **({"negotiation": rec.extra["negotiation"]} if rec.extra.get("negotiation") else {}),
    }


def _pick(source: dict[int, dict[str, Any]], taken: set[int], index: int, tool: str, args: Any) -> int | None:
    """The source call (by its index) a fork's call ``index`` is served from: the one at the same ordinal when tool
    and args are equal, else the first one not ``taken`` with equal tool and args."""

    def equal(i: int) -> bool:
        return source[i]["toolName"] == tool and same_json(source[i]["args"], args)

    if index in source and index not in taken and equal(index):
        return index
    return next((i for i in sorted(source) if i not in taken and equal(i)), None)


def _replay_source(
    ports: Ports, session: GatewaySession, index: int, tool: str, args: Any
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(the source call that serves this one, or None; the source's calls as entries ``{tool, args, index}`` for the
    miss detail). The calls the fork was served earlier are assigned again in index order, as they were."""
    if session.source_run_id is None:
        return None, []
    source = {
        _index(r): _as_source(r)
        for r in ports.tool_calls.list_calls(session.source_run_id)
        if r.invocation_id == session.invocation_id
    }
    taken: set[int] = set()
    for prior in _earlier(ports, session, index):
        if prior.source != "recorded" or (prior.error or {}).get("code") == c.REPLAY_SOURCE_MISSING:
            continue
        i = _pick(source, taken, _index(prior), prior.tool_name, prior.args)
        if i is not None:
            taken.add(i)
    chosen = _pick(source, taken, index, tool, args)
    entries = [{"tool": source[i]["toolName"], "args": source[i]["args"], "index": i} for i in sorted(source)]
    return (source[chosen] if chosen is not None else None), entries


def _index(rec: ToolCallRecord) -> int:
    """A call's index in its invocation (``callId`` = ``<invocationId>#<index>``)."""
    return int(rec.call_id.rsplit("#", 1)[1]) if "#" in rec.call_id else 0


# --------------------------------------------------------------------------- EVAL


def _trial_plan(ports: Ports, session: GatewaySession, rec: RunRecord | None) -> FixturePlan | None:
    """The trial's fixtures (its task's, as ``evaltrial`` builds them), with the entries its earlier calls took
    consumed again. None: the task's tools go live (no fixtures, or ``live-shadow``)."""
    plan = load_plan(ports, session.run_id)
    task_id = session.invocation_id.rsplit(":", 1)[0]
    task = next((t for t in plan["suite"]["tasks"] if str(t.get("taskId")) == task_id), None)
    if task is None or rec is None:
        return FixturePlan([], "fail")  # nothing to serve from: every call is a miss
    fp = fixture_plan(ports, plan, task, session.tenant, served=rec)
    if fp is None:
        return None
    fresh = fp.fresh()
    for prior in _earlier(ports, session, LAST_INDEX):
        if prior.source == "fixture" and not prior.extra.get("miss"):
            fresh.take(prior.tool_name, prior.args)
    return fresh


# --------------------------------------------------------------------------- the CallToolResult


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _error(error: dict[str, Any]) -> dict[str, Any]:
    return {
        "content": [_text(str(error.get("message") or error.get("code")))],
        "structuredContent": error,
        "isError": True,
    }


def _miss(code: str, message: str, tool: str) -> dict[str, Any]:
    return {"code": code, "message": message, "tool": tool, "closest": None, "differingPointers": []}


def _missed(
    miss: dict[str, Any], tool: str, args: Any, entries: list[dict[str, Any]], content_free: bool
) -> dict[str, Any]:
    """The fail-closed answer: the recorded entry nearest to the call (its ``index``: a source call's own index in
    a replay, its place in the plan in a trial), the pointers at which they differ, and (same tool) the
    ``fixtureMatching`` rules that would have matched: the eval report's miss detail."""
    near = closest(tool, args, entries)
    if near is not None:
        i, ptrs = near
        same = entries[i].get("tool") == tool
        miss["closest"] = {"index": entries[i].get("index", i), "tool": entries[i].get("tool"), "sameTool": same}
        miss["differingPointers"] = ptrs
        if same:
            miss["wouldMatchWith"] = would_match(entries[i].get("args"), args, bounds=not content_free)
    return {"content": [_text(miss["message"])], "structuredContent": miss, "isError": True}


def _result(out: ToolOutcome) -> dict[str, Any]:
    if out.status != "ok":
        return _error(out.error or {"code": c.EXTERNAL_CALL_FAILED, "message": "the tool call failed"})
    result = out.result
    if out.transport == "mcp" and isinstance(result, dict) and isinstance(result.get("content"), list):
        return result  # RFC 0204: an MCP tool's CallToolResult, unaltered
    text = json.dumps(result, separators=(",", ":"), ensure_ascii=False)
    doc: dict[str, Any] = {"content": [_text(text)], "isError": False}
    if isinstance(result, dict):
        doc["structuredContent"] = result
    return doc
