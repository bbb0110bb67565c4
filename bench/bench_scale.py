"""Scale figures (issue 15): a live run, a branch fork and a replay fork from 0 of ~100,000 events, a 10,000-node
workflow and an agent making 10,000 tool calls, each next to its AWS lower bound.

Run: ``.venv/bin/python -m bench.bench_scale`` (part of ``make bench``; takes minutes). ``BENCH_SCALE_EVENTS`` sets
the loop run's size (default 100,000), ``BENCH_SCALE_NODES`` the chain (default 10,000), ``BENCH_SCALE_AGENT_CALLS``
the agent's tool calls (default 10,000), ``BENCH_SCALE_FORKS`` the forks made (default ``branch,replay``). Prints AWS requests and bytes (the exact meter of ``bench.common``: every
task of the run, whatever thread ran it; the bench's own polling apart) and their bounds; asserts nothing.

Bounds: a run appends its events in transactions of at most 99 events plus the run item's update (⌈events/99⌉),
and needs a few requests to start and to read its run (4). A fork reads its source once (what a ``Query`` of the
whole log reads), copies its prefix as pages of 99 events in batches of 25 pages and appends what it re-executes in
transactions of 99.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

from bench.common import TENANT, AwsMeter, api_event, call, line, start_stack, wait_status


def _wire(run_id: str) -> str:
    return run_id.replace("/", "~2F")


def _create(body: dict[str, Any]) -> str:
    out = call("create_run", api_event("POST", "/runs", "/runs", body))
    return str(json.loads(out["body"])["runId"])


def _history_events(aws: Any, run_id: str) -> tuple[int, int]:
    """(executions, most history events in one) of every execution this run's workflow or fork machine ran."""
    sfn = aws.client("stepfunctions")
    base = run_id.replace("/", "--")
    most = executions = 0
    for machine in sfn.list_state_machines()["stateMachines"]:
        kwargs: dict[str, Any] = {"stateMachineArn": machine["stateMachineArn"], "maxResults": 1000}
        while True:
            page = sfn.list_executions(**kwargs)
            for ex in page["executions"]:
                if not ex["name"].startswith(base[:60]):
                    continue
                executions += 1
                n, hk = 0, {"executionArn": ex["executionArn"], "maxResults": 1000}
                while True:
                    h = sfn.get_execution_history(**hk)
                    n += len(h["events"])
                    if not h.get("nextToken"):
                        break
                    hk["nextToken"] = h["nextToken"]
                most = max(most, n)
            if not page.get("nextToken"):
                break
            kwargs["nextToken"] = page["nextToken"]
    return executions, most


def _log_bytes(ports: Any, run_id: str) -> int:
    return sum(len(json.dumps(ev, separators=(",", ":"))) for page in ports.events.iter_events(run_id) for ev in page)


def _run(aws: Any, ports: Any, meter: AwsMeter, label: str, body: dict[str, Any], writes: int = 0) -> str:
    """Create a run, wait for it; print its requests against ⌈events/99⌉ + 4 (+ ``writes``: one per tool call's
    record) and its bytes against its log."""
    meter.reset()
    t0 = time.monotonic()
    with meter.origin("create"):
        run_id = _create(body)
    status = wait_status(ports, run_id, meter, timeout=7200)
    used = meter.usage("create", run_id)
    events = ports.runs.get_run(run_id).last_seq + 1
    bound = math.ceil(events / 99) + 4 + writes
    line(
        f"{label}: {events:,} events, {status}, {time.monotonic() - t0:.0f} s",
        used.total(),
        f"requests; bound {bound}; ratio {used.total() / bound:.3f} {used.top(4)}",
    )
    log = _log_bytes(ports, run_id)
    line(
        f"{label}: bytes sent / received",
        f"{used.bytes_sent() / 1e6:.2f} / {used.bytes_received() / 1e6:.2f} MB",
        f"for a log of {log / 1e6:.2f} MB; sent / log {used.bytes_sent() / max(1, log):.2f}",
    )
    execs, most = _history_events(aws, run_id)
    line(f"{label}: Step Functions executions, most history events", f"{execs}, {most:,}", "(limit 25,000)")
    return run_id


def main() -> None:
    from shared.settings import get_settings

    agent_calls = int(os.environ.get("BENCH_SCALE_AGENT_CALLS", "10000"))
    os.environ["RUN_TOOL_CALL_BUDGET"] = str(max(1000, agent_calls))
    get_settings.cache_clear()
    aws, meter = start_stack()
    from shared.services.workflows import register_workflow
    from shared.wiring import get_ports
    from tests.workflows import chain, scripted_agent

    ports = get_ports()
    target = int(os.environ.get("BENCH_SCALE_EVENTS", "100000"))
    nodes = int(os.environ.get("BENCH_SCALE_NODES", "10000"))
    try:
        if target > 0:
            _loop_and_forks(aws, ports, meter, target)
        if nodes > 0:
            register_workflow(ports, TENANT, chain("bench-scale-chain", nodes))
            _run(aws, ports, meter, f"{nodes:,}-node chain", {"workflowId": "bench-scale-chain"})
        if agent_calls > 0:
            register_workflow(ports, TENANT, scripted_agent("bench-scale-agent"))
            script = {
                "calls": [{"tool": "conformance.eval:echo", "args": {"i": i}} for i in range(agent_calls)],
                "answer": "done",
            }
            agent_run = _run(
                aws,
                ports,
                meter,
                f"agent, {agent_calls:,} tool calls",
                {"workflowId": "bench-scale-agent", "inputs": {"script": script}},
                writes=agent_calls,
            )
            used = meter.usage("create", agent_run)
            item = ports.runs._c.get_item(
                TableName=ports.runs._t,  # type: ignore[attr-defined]
                Key={"pk": {"S": agent_run}, "sk": {"S": "RUN"}},
            )["Item"]
            line(
                "agent: requests per tool call",
                f"{used.total() / agent_calls:.2f}",
                f"(bound 1: the call's record; run item now {len(json.dumps(item)) / 1000:.1f} KB)",
            )
    finally:
        meter.close()
        aws.stop()


def register_loop(ports: Any, workflow_id: str, events: int) -> None:
    """Register ``workflow_id``: a loop of two noop nodes (4 events per iteration, the fastest node type) whose run
    stores about ``events`` events."""
    from shared.services.workflows import register_workflow
    from tests.workflows import definition, edge, node

    doc = definition(
        workflow_id,
        [node("s", "core.noop"), node("a", "core.noop"), node("b", "core.noop")],
        [edge("s", "a", eid="sa"), edge("a", "b", eid="ab"), edge("b", "a", eid="ba")],
        settings={"maxLoopbackIterations": max(1, (events - 4) // 4)},
    )
    register_workflow(ports, TENANT, doc)


def _loop_and_forks(aws: Any, ports: Any, meter: AwsMeter, target: int) -> None:
    """A live run of ~``target`` events, then a branch fork from its middle and a replay fork from 0."""
    register_loop(ports, "bench-scale-loop", target)
    print(f"A run of ~{target:,} events (a loop of noop nodes) and its forks (local moto; counts, not seconds)")
    run_id = _run(aws, ports, meter, "live run", {"workflowId": "bench-scale-loop"})
    events = ports.runs.get_run(run_id).last_seq + 1

    # One read of the source log: what a fork or replay must read at least.
    meter.reset()
    with meter.origin("one-read"):
        sum(len(p) for p in ports.events.iter_events(run_id))
    one = meter.usage("one-read")
    line("one read of the log", f"{one.bytes_received() / 1e6:.2f} MB", f"{one.total()} Query requests")

    modes = os.environ.get("BENCH_SCALE_FORKS", "branch,replay").split(",")  # which forks to make
    for mode, from_seq in (("branch", events // 2), ("replay", 0)):
        if mode not in modes:
            continue
        meter.reset()
        t0 = time.monotonic()
        with meter.origin("fork"):
            out = call(
                "run_actions",
                api_event("POST", f"/runs/{_wire(run_id)}:fork", "/runs/{runId}", {"mode": mode, "fromSeq": from_seq}),
            )
        asked = meter.usage("fork")
        child = str(json.loads(out["body"])["runId"])
        line(
            f"POST :fork ({mode}, fromSeq {from_seq:,})",
            asked.total(),
            f"requests {dict(asked.calls)} (constant in the log's size)",
        )
        status = wait_status(ports, child, meter, timeout=7200)
        used = meter.usage("fork", child)
        crec = ports.runs.get_run(child)
        executed = crec.last_seq + 1 - from_seq
        # A branch needs no index: it reads its prefix (copied) and nothing else of the source.
        reads = one.total() if mode == "replay" else math.ceil(one.total() * from_seq / events)
        bound = reads + math.ceil(math.ceil(from_seq / 99) / 25) + math.ceil(executed / 99) + 4
        line(
            f"{mode} fork: {crec.last_seq + 1:,} events, {status}, {time.monotonic() - t0:.0f} s",
            used.total(),
            f"requests; bound {bound}; ratio {used.total() / bound:.3f} {used.top(4)}",
        )
        need = one.bytes_received() * (1 if mode == "replay" else from_seq / events)
        line(
            f"{mode} fork: bytes read",
            f"{used.bytes_received() / 1e6:.2f} MB",
            f"{used.bytes_received() / max(1, need):.3f}x one read of what it needs ({need / 1e6:.2f} MB)",
        )
        execs, most = _history_events(aws, child)
        line(f"{mode} fork: Step Functions executions, most history events", f"{execs}, {most:,}")


if __name__ == "__main__":
    main()
