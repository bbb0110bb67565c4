"""Scale figures (issue 15): a live run, a branch fork and a replay fork from 0 of ~100,000 events.

Run: ``.venv/bin/python -m bench.bench_scale`` (part of ``make bench``; takes minutes). ``BENCH_SCALE_EVENTS`` sets
the size (default 100,000). Prints AWS requests and bytes next to their lower bounds; asserts nothing.

Bytes are counted on our ports' clients (request bodies sent, response bodies received), so they include what
the engine's Lambda tasks do on moto's threads. The bench's own status polls are counted and subtracted.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections import Counter
from typing import Any

from bench.common import TENANT, api_event, call, line, start_stack


class ByteCounter:
    """Bytes sent and received per AWS operation (botocore ``before-send`` / ``after-call`` hooks)."""

    def __init__(self) -> None:
        self.sent: Counter[str] = Counter()
        self.received: Counter[str] = Counter()

    def on_send(self, request: Any = None, **kw: Any) -> None:
        body = getattr(request, "body", None) or b""
        size = len(body.getbuffer()) if hasattr(body, "getbuffer") else len(body) if isinstance(body, bytes | str) \
            else int((getattr(request, "headers", None) or {}).get("Content-Length") or 0)
        self.sent[str(kw.get("event_name", "?")).split(".", 1)[-1]] += size

    def on_call(self, http_response: Any = None, model: Any = None, **_: Any) -> None:
        # the Content-Length header: reading ``content`` would consume a streamed body (S3 GetObject)
        headers = getattr(http_response, "headers", None) or {}
        size = headers.get("content-length") or headers.get("Content-Length")
        if size is None and not getattr(model, "has_streaming_output", False):
            size = len(getattr(http_response, "content", None) or b"")
        self.received[getattr(model, "name", "?")] += int(size or 0)

    def reset(self) -> None:
        self.sent.clear()
        self.received.clear()


def _wire(run_id: str) -> str:
    return run_id.replace("/", "~2F")


def _wait(ports: Any, run_id: str, timeout: float = 3600) -> tuple[str, int]:
    """Poll sparsely; return the status and how many GetItem requests the polling made (to subtract)."""
    polls = 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        polls += 1
        rec = ports.runs.get_run(run_id)
        if rec is not None and rec.terminal:
            return str(rec.status), polls
        time.sleep(1.0)
    raise TimeoutError(run_id)


def main() -> None:
    from shared.settings import get_settings

    os.environ["RUN_TOOL_CALL_BUDGET"] = str(max(1000, int(os.environ.get("BENCH_SCALE_AGENT_CALLS", "10000"))))
    get_settings.cache_clear()
    aws, counter = start_stack()
    from shared.services.workflows import register_workflow
    from shared.wiring import get_ports
    from tests.workflows import definition, edge, node

    ports = get_ports()
    nbytes = ByteCounter()
    for c in {id(c): c for c in (ports.runs._c, ports.events._c, ports.tool_calls._c, ports.host._c,  # type: ignore[attr-defined]
                                 ports.blobs._c)}.values():  # type: ignore[attr-defined]
        c.meta.events.register("before-send.*.*", nbytes.on_send)
        c.meta.events.register("after-call.*.*", nbytes.on_call)
    target = int(os.environ.get("BENCH_SCALE_EVENTS", "100000"))
    agent_calls = int(os.environ.get("BENCH_SCALE_AGENT_CALLS", "10000"))
    iterations = max(1, (target - 4) // 4)
    try:
        # A loop of two noop nodes: 4 events per iteration (the fastest node type).
        doc = definition("bench-scale-loop", [node("s", "core.noop"), node("a", "core.noop"), node("b", "core.noop")],
                         [edge("s", "a", eid="sa"), edge("a", "b", eid="ab"), edge("b", "a", eid="ba")],
                         settings={"maxLoopbackIterations": iterations})
        register_workflow(ports, TENANT, doc)
        print(f"A run of ~{target:,} events (a loop of noop nodes), forks of it (local moto; counts, not seconds)")

        counter.reset()
        nbytes.reset()
        t0 = time.monotonic()
        out = call("create_run", api_event("POST", "/runs", "/runs", {"workflowId": "bench-scale-loop"}))
        run_id = str(json.loads(out["body"])["runId"])
        status, polls = _wait(ports, run_id)
        rec = ports.runs.get_run(run_id)
        events = rec.last_seq + 1
        requests = counter.total() - polls - 1
        bound = math.ceil(events / 99) + 4
        line(f"live run: {events:,} events, {status}, {time.monotonic() - t0:.0f} s", requests,
             f"requests; bound {bound} (ceil(events/99) + 4); ratio {requests / bound:.2f}")
        written = sum(nbytes.sent.values())
        log_bytes = _log_bytes(ports, run_id)
        line("live run: bytes sent to AWS", f"{written / 1e6:.1f} MB",
             f"for a log of {log_bytes / 1e6:.1f} MB; ratio {written / max(1, log_bytes):.2f}")

        # One read of the source log: what a fork or replay must read at least.
        counter.reset()
        nbytes.reset()
        sum(len(p) for p in ports.events.iter_events(run_id))
        one_read = sum(nbytes.received.values())
        one_read_requests = counter.total()
        line("one read of the log", f"{one_read / 1e6:.1f} MB", f"{one_read_requests} Query requests")

        for mode, from_seq in (("branch", events // 2), ("replay", 0)):
            counter.reset()
            nbytes.reset()
            t0 = time.monotonic()
            out = call("run_actions", api_event("POST", f"/runs/{_wire(run_id)}:fork", "/runs/{runId}",
                                                {"mode": mode, "fromSeq": from_seq}))
            fork_requests = counter.total()
            child = str(json.loads(out["body"])["runId"])
            line(f"POST :fork ({mode}, fromSeq {from_seq:,})", fork_requests, "requests (constant in the log size)")
            status, polls = _wait(ports, child)
            crec = ports.runs.get_run(child)
            requests = counter.total() - polls - 1
            read = sum(nbytes.received.values())
            copied = from_seq
            executed = crec.last_seq + 1 - from_seq
            # Bound: read the source once (index + prefix/replay comparison), copy the prefix in 25-item batches,
            # append the re-executed events in transactions of 99.
            bound = one_read_requests + math.ceil(copied / 25) + math.ceil(executed / 99) + 4
            line(f"{mode} fork: {crec.last_seq + 1:,} events, {status}, {time.monotonic() - t0:.0f} s", requests,
                 f"requests; bound ~{bound}; ratio {requests / bound:.2f}")
            line(f"{mode} fork: bytes read", f"{read / 1e6:.1f} MB",
                 f"{read / max(1, one_read):.2f}x one read of the source log")
        _agent(ports, counter, nbytes, agent_calls)
    finally:
        aws.stop()


def _agent(ports: Any, counter: Any, nbytes: ByteCounter, calls: int) -> None:
    """An agent making ``calls`` tool calls in one invocation: the run item stays small, bytes stay linear."""
    from shared.services.workflows import register_workflow
    from tests.workflows import scripted_agent

    if calls <= 0:
        return
    register_workflow(ports, TENANT, scripted_agent("bench-scale-agent"))
    script = {"calls": [{"tool": "conformance.eval:echo", "args": {"i": i}} for i in range(calls)], "answer": "done"}
    counter.reset()
    nbytes.reset()
    t0 = time.monotonic()
    out = call("create_run", api_event("POST", "/runs", "/runs", {"workflowId": "bench-scale-agent",
                                                                  "inputs": {"script": script}}))
    run_id = str(json.loads(out["body"])["runId"])
    status, polls = _wait(ports, run_id)
    rec = ports.runs.get_run(run_id)
    requests = counter.total() - polls - 1
    line(f"agent with {calls:,} tool calls: {rec.last_seq + 1:,} events, {status}, {time.monotonic() - t0:.0f} s",
         requests, f"requests ({requests / max(1, calls):.2f} per tool call)")
    written = sum(nbytes.sent.values())
    item = ports.runs._c.get_item(TableName=ports.runs._t, Key={"pk": {"S": run_id}, "sk": {"S": "RUN"}})["Item"]  # type: ignore[attr-defined]
    line("agent: bytes sent to AWS", f"{written / 1e6:.1f} MB",
         f"for a log of {_log_bytes(ports, run_id) / 1e6:.1f} MB; run item now {len(json.dumps(item)) / 1000:.1f} KB")


def _log_bytes(ports: Any, run_id: str) -> int:
    return sum(len(json.dumps(ev, separators=(",", ":"))) for page in ports.events.iter_events(run_id) for ev in page)


if __name__ == "__main__":
    main()
