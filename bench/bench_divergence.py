"""The eval report with divergences: a candidate of ``BENCH_DIVERGENCE_TASKS`` tasks (default 600, one trial each)
against its baseline, every other task's second tool call sent with one argument changed, on the embedded stack.

Reads every page of ``GET /host/openwop-serverless/runs/{runId}/eval-report`` (``limit`` 250, so several pages)
and prints pages, AWS requests and bytes received through our ports, against a stated lower bound: per page, one
read each of what a page with divergences must hold, made directly through the ports — the candidate's run item
and plan, its page of trials and of tool-call records (one key-range Query each), and the baseline's page of trials
(one key-range Query) — plus the baseline's plan once (immutable: one container serving the pages keeps it). The report's
figure over the bound should stay within 1.2x.

Run: ``.venv/bin/python -m bench.bench_divergence`` (or ``make bench``). Prints figures; asserts nothing.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from bench.bench_eval import _wait
from bench.common import TENANT, api_event, call, line, start_stack, wait_execution

TASKS = int(os.environ.get("BENCH_DIVERGENCE_TASKS", "600"))
PAGE = 250
AGENT = "conformance-eval-agent"
SUITE = "bench.local.evals.divergence"


def suite(version: str, changed: bool) -> dict[str, Any]:
    tasks = []
    for i in range(TASKS):
        limit = 2 if changed and i % 2 else 1
        tasks.append({
            "taskId": f"task-{i:05d}",
            "input": {"calls": [{"tool": "conformance.eval:echo", "args": {"i": i}},
                                {"tool": "conformance.eval:echo", "args": {"q": f"find-{i}", "opts": {"limit": limit}}}],
                      "answer": f"answer-{i}"},
            "expected": {"kind": "golden", "match": {"strategy": "exact", "value": f"answer-{i}"}},
            "trajectory": {"match": "in-order", "calls": [{"tool": "conformance.eval:echo",
                                                           "args": {"q": f"find-{i}", "opts": {"limit": 1}}}]},
        })
    return {"suiteId": SUITE, "version": version, "modes": ["golden", "regression"], "trials": 1, "tasks": tasks}


def _run(aws: Any, ports: Any, body: dict[str, Any]) -> str:
    out = call("create_run", api_event("POST", "/runs", "/runs", body))
    assert out["statusCode"] == 201, out["body"][:300]
    run_id = str(json.loads(out["body"])["runId"])
    assert _wait(aws, run_id) == "completed"
    rec = ports.runs.get_run(run_id)
    wait_execution(aws, str(rec.execution_arn), time.monotonic() + 300)
    return run_id


def main() -> None:
    aws, meter = start_stack()
    from shared.engine import evalrun
    from shared.protocol.ids import project_id
    from shared.services import suites
    from shared.wiring import get_ports

    ports = get_ports()
    try:
        stamp = int(time.time()) % 100000
        v1, v2 = f"1.0.{stamp}", f"2.0.{stamp}"
        suites.register(ports, TENANT, suite(v1, False))
        suites.register(ports, TENANT, suite(v2, True))
        t0 = time.perf_counter()
        base = _run(aws, ports, {"mode": "eval", "evalSuiteRef": f"{SUITE}@{v1}", "agentId": AGENT})
        cand = _run(aws, ports, {"mode": "eval", "evalSuiteRef": f"{SUITE}@{v2}", "agentId": AGENT,
                                 "evalModes": ["golden", "regression"], "baselineRunId": base})
        print(f"Eval report with divergences: {TASKS} tasks x 1 trial, 2 tool calls each, every other task's second "
              f"call with /opts/limit changed; pages of <= {PAGE} tasks (both runs took "
              f"{time.perf_counter() - t0:.0f} s)")
        path = f"/host/openwop-serverless/runs/{project_id(cand)}/eval-report"
        route = "/host/openwop-serverless/runs/{runId}/eval-report"
        evalrun._plan_cache.clear()  # a cold container: the first page reads the baseline's plan, later ones reuse it
        meter.reset()
        spans: list[tuple[int, int]] = []
        bodies: list[int] = []
        diverged = 0
        query = f"limit={PAGE}"
        t1 = time.perf_counter()
        with meter.origin("report"):
            for _ in range(TASKS):
                rep = call("get_eval_report", api_event("GET", path, route, query=query))
                assert rep["statusCode"] == 200, rep["body"][:300]
                doc = json.loads(rep["body"])
                first = int(query.rsplit("tasks-", 1)[1]) if "cursor" in query else 0
                spans.append((first, first + len(doc["tasks"])))
                bodies.append(len(rep["body"]))
                diverged += sum(1 for t in doc["tasks"] if t.get("divergence"))
                if not doc.get("nextCursor"):
                    break
                query = f"limit={PAGE}&cursor={doc['nextCursor']}"
        wall = (time.perf_counter() - t1) * 1000
        got = meter.usage("report")
        with meter.origin("bound"):
            evalrun.load_plan(ports, base, cached=False)  # once: immutable, a container keeps it
            for start, end in spans:
                ports.runs.get_run(cand)
                evalrun.load_plan(ports, cand, cached=False)
                evalrun.load_trials(ports, cand, (start, end))
                ports.tool_calls.list_calls(cand, between=evalrun.call_keys_between(start, end))
                evalrun.load_trials(ports, base, (start, end))
        bound = meter.usage("bound")
        line("pages, tasks with a divergence", f"{len(spans)}, {diverged}", f"(of {TASKS}; expected {TASKS // 2})")
        line("AWS requests, all pages", got.total(), f"(bound {bound.total()}: "
             f"{got.total() / max(1, bound.total()):.2f}x; {', '.join(f'{op} {n}' for op, n in got.calls.most_common())})")
        line("bytes received from AWS, all pages", f"{got.bytes_received() / 1e6:.2f} MB",
             f"(bound {bound.bytes_received() / 1e6:.2f} MB: {got.bytes_received() / max(1, bound.bytes_received()):.3f}x)")
        line("report bodies: largest page, all pages", f"{max(bodies) // 1024} KiB, {sum(bodies) // 1024}", "KiB")
        line("time, all pages", f"{wall:.0f}", "ms")
    finally:
        meter.close()
        aws.stop()


if __name__ == "__main__":
    main()
