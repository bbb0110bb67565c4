"""Foundation and engine figures: AWS requests per operation, cold imports, engine throughput.

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
    aws, counter = start_stack()
    from shared.services.workflows import register_workflow
    from shared.wiring import get_ports
    from tests.workflows import chain, definition, edge, node, variable

    ports = get_ports()
    try:
        print("AWS requests per API operation (botocore before-call hook; warm caches)")
        call("create_run", api_event("POST", "/runs", "/runs", {"workflowId": "conformance-noop"}))  # warm auth cache
        counter.reset()
        run_id = _create("conformance-noop")
        line("POST /runs (workflow run)", counter.total(), f"requests {dict(counter.calls)}")
        wait_status(ports, run_id)
        counter.reset()
        call("get_run", api_event("GET", f"/runs/{_wire(run_id)}", "/runs/{runId}"))
        line("GET /runs/{runId}", counter.total(), f"requests {dict(counter.calls)}")

        # A 1,000-event run: a loop of two noop nodes (4 events per iteration).
        doc = definition("bench-loop", [node("s", "core.noop"), node("a", "core.noop"), node("b", "core.noop")],
                         [edge("s", "a", eid="sa"), edge("a", "b", eid="ab"), edge("b", "a", eid="ba")],
                         settings={"maxLoopbackIterations": 249})
        register_workflow(ports, TENANT, doc)
        loop_id = _create("bench-loop")
        wait_status(ports, loop_id)
        n = ports.runs.get_run(loop_id).last_seq + 1
        counter.reset()
        out = call("poll_run_events", api_event("GET", f"/runs/{_wire(loop_id)}/events/poll",
                                                "/runs/{runId}/events/poll", query="afterSequence=0&timeout=1"))
        got = len(json.loads(out["body"])["events"])
        line(f"GET /events/poll of a {n}-event run ({got} events, {len(out['body']) // 1024} KiB)",
             counter.total(), f"requests {dict(counter.calls)}")

        print("Engine")
        register_workflow(ports, TENANT, chain("bench-1000-nodes", 1000))
        counter.reset()
        t = time.perf_counter()
        big = _create("bench-1000-nodes")
        wait_status(ports, big, counter)
        wall = time.perf_counter() - t
        rec = ports.runs.get_run(big)
        events = rec.last_seq + 1
        line("1,000-node noop workflow: wall time", f"{wall:.2f}", "s")
        line("1,000-node noop workflow: AWS requests", counter.total(), f"{dict(counter.calls.most_common(6))}")
        line("events appended per second", f"{events / wall:.0f}", "events/s")
        sfn = aws.client("stepfunctions")
        hist = sfn.get_execution_history(executionArn=rec.execution_arn, maxResults=1000)["events"]
        line("SFN history events per 1,000 run events", f"{len(hist) * 1000 / events:.1f}",
             f"({len(hist)} for {events})")

        register_workflow(ports, TENANT, definition(
            "bench-agent", [node("agent", "core.agent", config={"agentId": "conformance-eval-agent"},
                                 inputs={"input": variable("script")})]))
        script = {"calls": [{"tool": "conformance.eval:counter", "args": {"op": "inc", "key": "bench"}}] * 100,
                  "answer": "done"}
        counter.reset()
        t = time.perf_counter()
        agent_run = _create("bench-agent", {"script": script})
        wait_status(ports, agent_run, counter)
        wall = time.perf_counter() - t
        line("agent making 100 counter calls: wall time", f"{wall:.2f}", "s")
        line("agent making 100 counter calls: AWS requests", counter.total(),
             f"{dict(counter.calls.most_common(6))}")

        print("Cold import of each handler module (best of 3 fresh interpreters, .pyc warm)")
        for f in manifest.FUNCTIONS:
            line(f.module, f"{cold_import_ms(f.module):.0f}", "ms")
    finally:
        aws.stop()


if __name__ == "__main__":
    main()
