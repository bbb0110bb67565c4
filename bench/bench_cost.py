"""What it costs: the exact counts of ``bench.common.AwsMeter`` turned into dollars at on-demand list prices
(``bench/prices.py``, us-east-1): per 1,000 workflow runs, per branch fork and per replay fork of a 10,000-event run,
and the deployed stack's idle cost per month, by default and with the operator's opt-ins. (The eval bench prints
the cost per task-trial, the agents bench the cost per model turn.)

Run: ``make bench`` (or ``.venv/bin/python -m bench.bench_cost``). Prints figures; asserts nothing.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

from bench import costs, prices
from bench.bench_host import _create
from bench.common import TENANT, AwsMeter, Usage, api_event, call, line, start_stack, wait_status

LOOP_EVENTS = 10_000


def _measured(meter: AwsMeter, ports: Any, make: Any) -> tuple[str, Usage]:
    meter.reset()
    with meter.origin("op"):
        run_id = make()
    wait_status(ports, run_id, meter)
    rec = ports.runs.get_run(run_id)
    meter.add_run_transitions(run_id, rec)
    return run_id, meter.usage("op", run_id)


def _fork(source: str, mode: str, from_seq: int) -> str:
    out = call(
        "run_actions",
        api_event(
            "POST", f"/runs/{source.replace('/', '~2F')}:fork", "/runs/{runId}", {"mode": mode, "fromSeq": from_seq}
        ),
    )
    assert out["statusCode"] in (200, 201, 202), out
    return str(json.loads(out["body"])["runId"])


def main() -> None:
    from shared.services.workflows import register_workflow
    from shared.wiring import get_ports
    from tests.workflows import chain, definition, edge, node, static

    print(
        f"What it costs (AWS list prices read {prices.PRICES_READ_ON}, {prices.REGION}; exact counts from local "
        "moto, Lambda GB-seconds from local wall time)"
    )
    aws, meter = start_stack()
    ports = get_ports()
    try:
        register_workflow(ports, TENANT, chain("bench-cost-10-nodes", 10))
        held = [node("h", "core.conformance.hold", inputs={"delayMs": static(2000)}), node("n", "core.noop")]
        register_workflow(ports, TENANT, definition("bench-cost-hold-once", held, [edge("h", "n", eid="hn")]))
        _measured(meter, ports, lambda: _create("conformance-noop"))  # warm caches
        for workflow, label in (
            ("conformance-noop", "one-node workflow"),
            ("bench-cost-10-nodes", "10-node chain"),
            ("bench-cost-hold-once", "workflow that holds 2 s, then one node"),
        ):
            run_id, used = _measured(meter, ports, lambda w=workflow: _create(w))
            events = ports.runs.get_run(run_id).last_seq + 1
            line(
                f"per 1,000 runs of a {label} ({events} events each)",
                costs.breakdown(used, 1000),
                f"[{used.total()} requests, {used.units['wru']} WRU, {used.units['rru']:.1f} RRU, "
                f"{used.transitions} transitions per run]",
            )

        iterations = math.ceil(LOOP_EVENTS / 4)
        register_workflow(
            ports,
            TENANT,
            definition(
                "bench-cost-loop",
                [node("s", "core.noop"), node("a", "core.noop"), node("b", "core.noop")],
                [edge("s", "a", eid="sa"), edge("a", "b", eid="ab"), edge("b", "a", eid="ba")],
                settings={"maxLoopbackIterations": iterations},
            ),
        )
        source, used = _measured(meter, ports, lambda: _create("bench-cost-loop"))
        events = ports.runs.get_run(source).last_seq + 1
        line(
            f"one live run of {events} events",
            costs.breakdown(used),
            f"[{used.total()} requests, {used.bytes_sent() // 1024} KiB sent]",
        )
        for mode, from_seq in (("branch", events - 2), ("replay", 0)):
            child, used = _measured(meter, ports, lambda m=mode, f=from_seq: _fork(source, m, f))
            line(
                f"one {mode} fork of the {events}-event run (fromSeq {from_seq})",
                costs.breakdown(used),
                f"[{used.total()} requests, {used.bytes_received() // 1024} KiB read, "
                f"{meter.unattributed('op', child)} unattributed]",
            )
        watcher(meter, ports)
    finally:
        meter.close()
        aws.stop()

    idle()


def watcher(meter: AwsMeter, ports: Any) -> None:
    """An SSE watcher left open on a quiet run (a hold: nothing new to send). On AWS each invocation of
    GET /runs/{runId}/events waits up to its WAIT_S for more and the client reconnects, so one watcher is
    3,600 / WAIT_S invocations an hour; one invocation is measured here and priced per hour."""
    from functions.stream_run_events.handler import WAIT_S
    from shared.services.workflows import register_workflow
    from tests.workflows import definition, node, static

    register_workflow(
        ports,
        TENANT,
        definition("bench-cost-hold", [node("h", "core.conformance.hold", inputs={"delayMs": static(40_000)})]),
    )
    run_id = _create("bench-cost-hold")
    wire = run_id.replace("/", "~2F")
    deadline = time.monotonic() + 30
    while ports.runs.get_run(run_id).last_seq < 1 and time.monotonic() < deadline:  # run.started, node.started
        time.sleep(0.1)
    time.sleep(1)  # the run is holding: nothing new until the hold ends
    last = ports.runs.get_run(run_id).last_seq
    meter.reset()
    with meter.origin("watch"):
        event = api_event("GET", f"/runs/{wire}/events", "/runs/{runId}/events")
        event["headers"]["last-event-id"] = str(last)
        out = call("stream_run_events", event)
    used = meter.usage("watch")
    per_hour = 3600 / WAIT_S
    line(
        f"an open SSE watcher on a quiet run, per hour ({per_hour:.0f} invocations of {WAIT_S:.0f} s)",
        costs.breakdown(used, per_hour),
        f"[one invocation: {out['statusCode']} {out['body'][:14]!r}, {used.total()} requests "
        f"({', '.join(f'{op} {n}' for op, n in used.calls.most_common())}), {used.units['rru']:.1f} RRU, "
        f"{used.gb_seconds:.2f} GB-s]",
    )
    wait_status(ports, run_id, meter)


def idle() -> None:
    """The idle month by default and with every opt-in, at list price and within CloudWatch's free tier."""
    for label, inventory in (
        ("by default", costs.idle_inventory_from_manifest()),
        (
            "with -c detailedAlarms=true -c dashboard=true",
            costs.idle_inventory_from_manifest(detailed=True, dashboard=True),
        ),
    ):
        listed = costs.idle_dollars_per_month(inventory)
        free = costs.idle_dollars_per_month(inventory, free_tier=True)
        print(
            f"Idle cost of the deployed stack per month {label}, no traffic (beyond storage): "
            f"${sum(listed.values()):.2f} (${sum(free.values()):.2f} within CloudWatch's free tier)"
        )
        for what, usd in listed.items():
            line(what, f"${usd:.2f}")
    print("Storage, per GB-month")
    for what, usd in costs.STORAGE_PER_GB_MONTH.items():
        line(what, f"${usd:.3f}")


if __name__ == "__main__":
    main()
