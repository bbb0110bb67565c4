"""Forks of eval runs: the child re-executes the eval from ``fromSeq`` with the same trial executor.

The fork request copied the source's plan (suite, agent, modes, baseline, the keys of its stored derived
fixture copies: never the source runs they came from) to the child. Here the child's first tasks copy the
prefix, then one task re-runs every trial in suite order and appends ``full[fromSeq:]``, where ``full`` is
the eval's whole log as this code produces it. Tool calls:

- ``replay``: every call is resolved from the source eval run's as-executed record at the same
  (invocation, call index), args included; anything else fails closed. No live tool runs, ever.
- ``branch``: calls whose events lie in the copied prefix are fixed history (resolved from the record);
  the rest run under the task's fixture plan (derived copies re-read from S3, fail-closed) or live.

Model calls of a model-backed agent follow the same rule through the model-call log: a replay serves every one
from the source's log (never a provider call), a branch serves the prefix's and calls the model for the rest.

Divergence from the source is reported like a workflow replay (first divergent sequence).
"""

from __future__ import annotations

from typing import Any

from shared.engine import evalrun, runner
from shared.engine.canonical import same_json
from shared.engine.model_agent import ModelSession
from shared.engine.tools import ToolRuntime, ToolTally
from shared.errors import ConflictError, RunGoneError
from shared.ports import Ports, RunRecord
from shared.protocol import codes as c


def _index(ports: Ports, rec: RunRecord) -> dict[str, Any]:
    from shared.engine import forkindex

    return forkindex.load(ports, rec.run_id)


def _head(ports: Ports, rec: RunRecord, plan: dict[str, Any]) -> list[dict[str, Any]]:
    """run.started and eval.started as the eval's Prepare emits them."""
    started, ev_started = evalrun.head_payloads(rec, plan)
    now = ports.clock.iso()
    return [{"type": c.RUN_STARTED, "payload": started, "timestamp": now},
            {"type": c.EVAL_STARTED, "payload": ev_started, "timestamp": now}]


def advance(ports: Ports, rec: RunRecord, *, tally: ToolTally | None = None) -> dict[str, Any]:
    fork = rec.data["fork"]
    from_seq = int(fork["fromSeq"])
    if rec.last_seq < from_seq - 1:
        return runner.copy_prefix_events(ports, rec)
    plan = evalrun.load_plan(ports, rec.run_id)
    index = _index(ports, rec)
    calls = {(str(r["invocationId"]), int(r["index"])): r for r in index.get("calls", [])}
    prefix = ports.events.read_events(rec.run_id, -1, limit=max(0, from_seq)) if from_seq else []
    in_prefix = {str(e["payload"].get("callId")) for e in prefix if e["type"] == c.AGENT_TOOL_RETURNED}
    fixed = {k: v for k, v in calls.items() if f"{k[0]}#{k[1]}" in in_prefix}
    mode = str(fork["mode"])
    tools = ToolRuntime(ports, rec.run_id, rec.tenant, mode, rec.expires_at,
                        int(ports.settings.run_tool_call_budget), calls if mode == "replay" else None,
                        recorded_first=fixed, tally=tally, deferred=[])
    source_id = str(fork["sourceRunId"])
    # Model calls: a replay serves every one from the source's log; a branch serves those of the prefix.
    fixed_turns: dict[str, int] = {}
    current = None
    for e in prefix:
        if e["type"] == c.AGENT_INVOCATION_STARTED:
            current = str(e["payload"].get("invocationId"))
        elif e["type"] == c.PROVIDER_USAGE and current is not None:
            fixed_turns[current] = fixed_turns.get(current, 0) + 1
    models = ModelSession(ports, rec.run_id, rec.tenant, mode, rec.expires_at,
                          (rec.data.get("configurable") or {}).get("ai"), source_id, fixed_turns=fixed_turns,
                          tally=tally)
    trials: dict[tuple[int, int], dict[str, Any]] = {}
    for item in evalrun.items(plan, rec.run_id):
        result = evalrun.run_trial(ports, rec, int(item["t"]), int(item["k"]), tools, plan=plan, models=models)
        trials[(result.task_index, result.trial)] = result.stored()
    drafts, summary = evalrun.finish_drafts(plan, trials, ports.clock.iso())
    full = _head(ports, rec, plan) + drafts
    source = {int(e["sequence"]): e for e in ports.events.read_events(source_id)}
    seq = rec.last_seq + 1
    events: list[dict[str, Any]] = []
    diverged = False
    for d in full[from_seq:]:
        ev = runner.make_event(ports, rec.run_id, seq, d["type"], d["payload"], None)
        events.append(ev)
        seq += 1
        src = source.get(int(ev["sequence"]))
        if mode == "replay" and not diverged and (src is None or not same_json(runner.comparable(src),
                                                                               runner.comparable(ev))):
            diverged = True
            payload: dict[str, Any] = {"sourceRunId": source_id, "atSequence": ev["sequence"],
                                       "divergencePoint": ev["type"],
                                       "divergenceKind": "extra" if src is None else
                                       ("type-mismatch" if src["type"] != ev["type"] else "output")}
            if src is not None:
                payload["originalEventId"] = src["eventId"]
            dev = runner.make_event(ports, rec.run_id, seq, c.REPLAY_DIVERGED, payload, None)
            dev["causationId"] = ev["eventId"]
            events.append(dev)
            seq += 1
    try:
        # Records of calls that claimed no effect (every call of a replay: recorded or refused) are written here,
        # 98 to a transaction, before the events that name them; a retried task decides and writes them equal.
        if tools.deferred:
            ports.tool_calls.put_calls(rec.run_id, tools.deferred, rec.expires_at)
        evalrun.append_chunked(ports, rec, events,
                               {"status": "completed", **evalrun.summary_updates(ports, rec.run_id, summary)})
    except (ConflictError, RunGoneError):
        pass
    return {"runId": rec.run_id, "next": "done", "waitSeconds": 0}
