"""Sampling rules (docs/decisions/0117-sampling-rules.md): AWS requests the rule's part of the events-stream consumer
makes per sampled run, per completed run the rule does not match, and per batch of a tenant whose rule was deleted
(its rules' version comes with the fan-out's read of the tenant, which ``bench.bench_webhooks`` measures).

Runs of the scripted conformance agent (one echo tool call each) on the embedded stack: ``RUNS`` of the workflow the
rule names, then ``RUNS`` of another one, then ``RUNS`` more once the rule is deleted. Only the requests made inside
``shared.services.sampling.on_stored`` (on the stream's thread) are counted; the webhook fan-out is measured by
``bench.bench_webhooks``.

Run: ``.venv/bin/python -m bench.bench_sampling`` (or ``make bench``). Prints figures; asserts nothing.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

from bench.common import TENANT, api_event, call, line, start_stack, wait_status

RUNS = 20
AGENT = "conformance-eval-agent"
SUITE = "bench.local.evals.sampled"
ROUTE = "/host/openwop-serverless/eval-suites/{suiteId}"


class _InRules:
    """Counts AWS calls made while ``on_stored`` runs on the calling thread."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.batches = 0
        self._local = threading.local()
        self._lock = threading.Lock()

    def __call__(self, model: Any = None, **_: Any) -> None:
        if getattr(self._local, "on", False):
            with self._lock:
                self.calls[getattr(model, "name", "?")] += 1

    def wrap(self, fn: Any) -> Any:
        def wrapped(ports: Any, stored: Any, *rest: Any) -> Any:
            self._local.on = True
            with self._lock:
                self.batches += 1
            try:
                return fn(ports, stored, *rest)
            finally:
                self._local.on = False

        return wrapped

    def take(self) -> tuple[int, dict[str, int], int]:
        with self._lock:
            out = (sum(self.calls.values()), dict(self.calls), self.batches)
            self.calls.clear()
            self.batches = 0
        return out


def _runs(ports: Any, workflow_id: str, tag: str) -> list[str]:
    from shared.local.ddb_streams import wait_for_stream_idle

    out = []
    for i in range(RUNS):
        script = {"calls": [{"tool": "conformance.eval:echo", "args": {"i": i}}], "answer": f"{tag}-{i}"}
        r = call(
            "create_run", api_event("POST", "/runs", "/runs", {"workflowId": workflow_id, "inputs": {"script": script}})
        )
        assert r["statusCode"] == 201, r["body"][:300]
        out.append(json.loads(r["body"])["runId"])
    for run_id in out:
        wait_status(ports, run_id)
    for _ in range(12):
        if wait_for_stream_idle(timeout=10.0):
            break
    return out


def main() -> None:
    from shared.services import sampling
    from shared.services.workflows import register_workflow
    from shared.wiring import get_ports
    from tests.workflows import scripted_agent

    start_stack()
    ports = get_ports()
    counter = _InRules()
    for c in {
        id(x): x
        for x in (
            ports.runs._c,
            ports.host._c,
            ports.events._c,  # type: ignore[attr-defined]
            ports.tool_calls._c,
            ports.blobs._c,
        )
    }.values():  # type: ignore[attr-defined]
        c.meta.events.register("after-call.*.*", counter)
    sampling.on_stored = counter.wrap(sampling.on_stored)  # type: ignore[method-assign]
    matched = register_workflow(ports, TENANT, scripted_agent("bench-sampled"))
    other = register_workflow(ports, TENANT, scripted_agent("bench-unsampled"))
    rules = ROUTE + "/rules"
    r = call(
        "manage_eval_suites",
        api_event(
            "POST",
            rules.replace("{suiteId}", SUITE),
            rules,
            {"agentId": AGENT, "filter": {"workflowId": matched}, "maxTasks": 500},
        ),
    )
    assert r["statusCode"] == 201, r["body"]
    rule_id = json.loads(r["body"])["ruleId"]
    _runs(ports, matched, "m")
    total, by_op, batches = counter.take()
    draft = json.loads(
        call("manage_eval_suites", api_event("GET", f"{ROUTE.replace('{suiteId}', SUITE)}/draft", ROUTE + "/draft"))[
            "body"
        ]
    )
    print(f"sampling rules: {RUNS} matching runs, {RUNS} non-matching, {RUNS} once the rule is deleted")
    line("tasks in the draft (matching completed runs)", draft["taskCount"])
    line("AWS requests per sampled run", f"{total / max(1, draft['taskCount']):.1f}", f"{by_op}")
    _runs(ports, other, "o")
    total, by_op, batches = counter.take()
    line("AWS requests per non-matching completed run", f"{total / RUNS:.1f}", f"{by_op}")
    d = call(
        "manage_eval_suites", api_event("DELETE", f"{rules.replace('{suiteId}', SUITE)}/{rule_id}", rules + "/{ruleId}")
    )
    assert d["statusCode"] == 204, d["body"]
    _runs(ports, matched, "n")
    total, by_op, batches = counter.take()
    line(
        "AWS requests per completed run, tenant whose rule was deleted (warm)",
        f"{total / RUNS:.2f}",
        f"{by_op} over {batches} batches (the rules are read again only when their version changes)",
    )


if __name__ == "__main__":
    main()
