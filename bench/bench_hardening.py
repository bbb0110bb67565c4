"""Hardening report: what an attacker and a careless client get, in counts that must all be zero.

- fuzz: schemathesis over the served OpenAPI document (requests sent, 5xx seen, failed checks);
- faults: throttled writes, tasks killed after each of their writes, tasks delivered twice (faults injected; events
  lost or duplicated; effects performed twice);
- cancels: 200+ runs cancelled at random points of a short hold before their side effect (effects after cancel);
- erasure: a run with forks, a fork of a fork, tool calls, effects and idempotency records, erased (items and
  objects left in every table and the bucket).

Run: ``make bench`` (or ``.venv/bin/python -m bench.bench_hardening``). Prints figures; asserts nothing.
Traffic goes only to the in-process host on 127.0.0.1, in bounded loops.
"""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.common import line  # (also quiets the handlers' loggers)

CANCELS = 200
KEY_A, TENANT_A = "bench-hardening-key-a", "tenant-a"


def _agent_workflow(ports: Any) -> str:
    from shared.services.workflows import register_workflow
    from tests.workflows import definition, edge, node, variable

    return register_workflow(
        ports,
        TENANT_A,
        definition(
            "bench-hardening-agent",
            [
                node(
                    "agent",
                    "core.agent",
                    config={"agentId": "conformance-eval-agent"},
                    inputs={"input": variable("script")},
                ),
                node("effect", "core.conformance.side-effect"),
            ],
            [edge("agent", "effect", eid="e")],
            variables=[{"name": "script", "type": "object", "required": True}],
        ),
    )


def _script(marker: str, counter: str | None = None) -> dict[str, Any]:
    key = counter or marker
    return {
        "calls": [
            {"tool": "conformance.eval:counter", "args": {"op": "inc", "key": key}},
            {"tool": "conformance.eval:echo", "args": {"m": marker}},
            {"tool": "conformance.eval:counter", "args": {"op": "inc", "key": key}},
        ],
        "answer": "done",
    }


def _wait(client: Any, run_id: str, timeout: float = 90) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = str(client.runs_get(run_id).status)
        if status in ("completed", "failed", "cancelled"):
            return status
        time.sleep(0.1)
    return "timeout"


def _problems(ports: Any, run_id: str, marker: str) -> tuple[int, int]:
    """(event problems, effects performed other than once) for one run of the agent workflow."""
    from tests.faults import check_run

    events = ports.events.read_events(run_id)
    event_problems = len(check_run(events)) + (0 if events and events[-1]["type"] == "run.completed" else 1)
    effects = abs(ports.host.counter_read(f"COUNTER#{TENANT_A}", marker) - 2)
    effects += abs(len(ports.host.query(f"LEDGER#{TENANT_A}", run_id + "#")) - 1)
    return event_problems, effects


def _faults(client: Any, ports: Any, wid: str) -> None:
    from openwop_client.types import CreateRunRequest

    from functions.tasks.advance_run.handler import lambda_handler
    from tests.faults import kill_after_write, throttle_writes

    def start(marker: str) -> str:
        return str(client.runs_create(CreateRunRequest(workflowId=wid, inputs={"script": _script(marker)})).runId)

    ddb = ports.runs._c
    injected = lost = twice = runs = 0
    markers = tuple(f"thr-{i}-{time.monotonic_ns()}" for i in range(5))
    with throttle_writes(ddb, markers) as got:
        ids = {m: start(m) for m in markers}
        for r in ids.values():
            _wait(client, r)
    injected += got.throttled
    plan = {f"kill-{n}-{time.monotonic_ns()}": n for n in range(1, 9)}
    with kill_after_write(ddb, plan) as killed:
        ids |= {m: start(m) for m in plan}
        for m in plan:
            _wait(client, ids[m])
    injected += killed.crashed
    dups = [f"dup-{i}-{time.monotonic_ns()}" for i in range(5)]
    ids |= {m: start(m) for m in dups}

    def deliver(run_id: str) -> None:
        for _ in range(20):
            if lambda_handler({"runId": run_id}, None)["next"] == "done":
                return

    threads = [threading.Thread(target=deliver, args=(ids[m],)) for m in dups for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    injected += len(threads)
    for m, r in ids.items():
        _wait(client, r)
        e, f = _problems(ports, r, m)
        lost, twice, runs = lost + e, twice + f, runs + 1
    line("faults injected (throttles, kills after a write, duplicate deliveries)", injected)
    line(f"runs with events lost or duplicated (of {runs})", lost)
    line(f"effects performed other than exactly once (of {runs * 2} effects)", twice)


def _cancels(client: Any, ports: Any) -> None:
    from tests.faults import cancel_at_random, effects_after_cancel

    rng = random.Random(2026)
    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(lambda _: cancel_at_random(client, random.Random(rng.random())), range(CANCELS)))
    after = cancelled = effects = 0
    time.sleep(2.0)  # every task has had time to run on past its hold
    for run_id, _how in outcomes:
        if _wait(client, run_id) != "cancelled":
            continue
        cancelled += 1
        events = client.runs_poll_events(run_id, timeout_seconds=1).events
        at = next((e.timestamp for e in events if e.type == "run.cancelled"), "")
        rows = ports.host.query(f"LEDGER#{TENANT_A}", run_id + "#")
        effects += len(rows)
        after += effects_after_cancel(ports, TENANT_A, run_id, at)
    line(
        f"randomized cancels (runs cancelled mid-flight / {CANCELS})",
        cancelled,
        f"({effects} effects before their cancel, {time.monotonic() - started:.0f} s)",
    )
    line("effects performed after a cancel", after)


def _erasure(host_url: str, client: Any, ports: Any, aws: Any, wid: str) -> None:
    import uuid

    from shared.local.ddb_streams import wait_for_stream_idle
    from shared.protocol.ids import project_id
    from shared.settings import get_settings
    from tests.faults import scan_for
    from tests.wire import raw

    marker = f"personal-{uuid.uuid4().hex}"
    # the counter's key names tenant state (it outlives any one run); the marker is what the run's agent saw
    script = _script(marker, counter=f"bench-counter-{uuid.uuid4().hex[:8]}")

    def post(path: str, body: dict[str, Any]) -> str:
        r = raw(host_url, "POST", path, body, key=KEY_A, headers={"Idempotency-Key": uuid.uuid4().hex})
        return str(r.json["runId"])

    source = post("/runs", {"workflowId": wid, "inputs": {"script": script}})
    _wait(client, source)
    replay = post(f"/runs/{project_id(source)}:fork", {"mode": "replay", "fromSeq": 0})
    branch = post(f"/runs/{project_id(source)}:fork", {"mode": "branch", "fromSeq": 10})
    for r in (replay, branch):
        _wait(client, r)
    grandchild = post(f"/runs/{project_id(replay)}:fork", {"mode": "replay", "fromSeq": 1})
    _wait(client, grandchild)
    s = get_settings()
    tables = [s.runs_table, s.events_table, s.tool_calls_table, s.host_table, s.idempotency_table]
    needles = [source, replay, branch, grandchild, marker]
    before = len(scan_for(aws.client("dynamodb"), aws.client("s3"), tables, s.fixtures_bucket, needles))
    raw(host_url, "DELETE", f"/runs/{project_id(source)}", key=KEY_A)
    wait_for_stream_idle(60)
    left = scan_for(aws.client("dynamodb"), aws.client("s3"), tables, s.fixtures_bucket, needles)
    line("erasure: items and objects holding the lineage, before", before)
    line(
        "erasure: items and objects left after (every table and the bucket)",
        len(left),
        f"{sorted(set(left))}" if left else "",
    )


def main() -> None:
    from openwop_client import OpenwopClient

    from bench.common import served_host
    from shared.wiring import get_ports
    from tests.fuzzing import fuzz, summary

    with served_host({KEY_A: TENANT_A}) as (aws, url):
        ports = get_ports()
        client = OpenwopClient(url, KEY_A)
        wid = _agent_workflow(ports)
        print("Hardening (local moto; every count below the first of each group must be 0)")
        figures, elapsed = fuzz(url, KEY_A)
        line("fuzz requests sent", figures.requests, f"({elapsed:.0f} s)")
        line("fuzz 5xx seen / failed checks", f"{figures.server_errors} / {len(figures.failures)}")
        for failure in figures.failures:  # what to look at, each one
            print(f"    failed: {failure[:600]}")
        print("  " + summary(figures, elapsed))
        _faults(client, ports, wid)
        _cancels(client, ports)
        _erasure(url, client, ports, aws, wid)


if __name__ == "__main__":
    main()
