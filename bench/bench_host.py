"""Foundation and engine figures: AWS requests and bytes per operation (exact, ``bench.common.AwsMeter``), cold
imports, engine throughput.

Run: ``make bench`` (or ``.venv/bin/python -m bench.bench_host``). Prints figures; asserts nothing.
"""

from __future__ import annotations

import json
import time

from bench.common import TENANT, api_event, call, cold_import_ms, line, start_stack, wait_status
from shared import manifest


def _wire(run_id: str) -> str:
    return run_id.replace("/", "~2F")


def _create(workflow_id: str, inputs: dict | None = None) -> str:
    body = {"workflowId": workflow_id, **({"inputs": inputs} if inputs else {})}
    out = call("create_run", api_event("POST", "/runs", "/runs", body))
    return str(json.loads(out["body"])["runId"])


def main() -> None:
    aws, meter = start_stack()
    from shared.services.workflows import register_workflow
    from shared.wiring import get_ports
    from tests.workflows import chain, definition, edge, node, variable

    ports = get_ports()
    try:
        print("AWS requests per API operation (exact meter: HTTP attempts through the ports' clients; warm caches)")
        call("create_run", api_event("POST", "/runs", "/runs", {"workflowId": "conformance-noop"}))  # warm auth cache
        meter.reset()
        with meter.origin("create"):
            run_id = _create("conformance-noop")
        line(
            "POST /runs (workflow run)", meter.usage("create").total(), f"requests {dict(meter.usage('create').calls)}"
        )
        wait_status(ports, run_id, meter)
        whole = meter.usage("create", run_id)
        line(
            "  the whole conformance-noop run (POST + its tasks)",
            whole.total(),
            f"requests, {whole.bytes_sent()} B sent, {whole.bytes_received()} B received",
        )
        meter.reset()
        with meter.origin("get"):
            call("get_run", api_event("GET", f"/runs/{_wire(run_id)}", "/runs/{runId}"))
        got = meter.usage("get")
        line("GET /runs/{runId}", got.total(), f"requests {dict(got.calls)}, {got.units['rru']:.1f} RRU")

        # A 1,000-event run: a loop of two noop nodes (4 events per iteration).
        doc = definition(
            "bench-loop",
            [node("s", "core.noop"), node("a", "core.noop"), node("b", "core.noop")],
            [edge("s", "a", eid="sa"), edge("a", "b", eid="ab"), edge("b", "a", eid="ba")],
            settings={"maxLoopbackIterations": 249},
        )
        register_workflow(ports, TENANT, doc)
        loop_id = _create("bench-loop")
        wait_status(ports, loop_id)
        n = ports.runs.get_run(loop_id).last_seq + 1
        meter.reset()
        with meter.origin("poll-events"):
            out = call(
                "poll_run_events",
                api_event(
                    "GET",
                    f"/runs/{_wire(loop_id)}/events/poll",
                    "/runs/{runId}/events/poll",
                    query="afterSequence=0&timeout=1",
                ),
            )
        got = len(json.loads(out["body"])["events"])
        polled = meter.usage("poll-events")
        line(
            f"GET /events/poll of a {n}-event run ({got} events, {len(out['body']) // 1024} KiB)",
            polled.total(),
            f"requests {dict(polled.calls)}, {polled.bytes_received() // 1024} KiB read",
        )

        print("Engine")
        register_workflow(ports, TENANT, chain("bench-1000-nodes", 1000))
        meter.reset()
        t = time.perf_counter()
        with meter.origin("create"):
            big = _create("bench-1000-nodes")
        wait_status(ports, big, meter)
        wall = time.perf_counter() - t
        rec = ports.runs.get_run(big)
        events = rec.last_seq + 1
        used = meter.usage("create", big)
        line("1,000-node noop workflow: wall time", f"{wall:.2f}", "s")
        line("1,000-node noop workflow: AWS requests", used.total(), f"{used.top()}")
        line(
            "1,000-node noop workflow: bytes sent / received",
            f"{used.bytes_sent() // 1024} / {used.bytes_received() // 1024}",
            "KiB",
        )
        line("  requests from other origins in that window (polling aside)", meter.unattributed("create", big))
        line("events appended per second", f"{events / wall:.0f}", "events/s")
        sfn = aws.client("stepfunctions")
        hist = sfn.get_execution_history(executionArn=rec.execution_arn, maxResults=1000)["events"]
        line(
            "SFN history events per 1,000 run events", f"{len(hist) * 1000 / events:.1f}", f"({len(hist)} for {events})"
        )

        register_workflow(
            ports,
            TENANT,
            definition(
                "bench-agent",
                [
                    node(
                        "agent",
                        "core.agent",
                        config={"agentId": "conformance-eval-agent"},
                        inputs={"input": variable("script")},
                    )
                ],
            ),
        )
        script = {
            "calls": [{"tool": "conformance.eval:counter", "args": {"op": "inc", "key": "bench"}}] * 100,
            "answer": "done",
        }
        meter.reset()
        t = time.perf_counter()
        with meter.origin("create"):
            agent_run = _create("bench-agent", {"script": script})
        wait_status(ports, agent_run, meter)
        wall = time.perf_counter() - t
        used = meter.usage("create", agent_run)
        line("agent making 100 counter calls: wall time", f"{wall:.2f}", "s")
        line("agent making 100 counter calls: AWS requests", used.total(), f"{used.top()}")
    finally:
        meter.close()
        aws.stop()
    cold_imports()


def cold_imports() -> None:
    print("Cold import of each handler module (best of 7 fresh interpreters, .pyc warm; wall and CPU ms)")
    worst = ("", 0.0)
    for f in manifest.FUNCTIONS:
        wall, cpu = cold_import_ms(f.module, repeat=7)
        worst = max(worst, (f.name, cpu), key=lambda x: x[1])
        line(f.module, f"{wall:.0f} / {cpu:.0f}", "ms (wall / CPU)")
    line("slowest handler import (CPU)", f"{worst[1]:.0f}", f"ms ({worst[0]}; target <= 150)")


if __name__ == "__main__":
    main()
