"""Eval figures: one eval of 200 tasks x 10 trials = 2,000 task-trials (``BENCH_EVAL_TASKS`` / ``BENCH_EVAL_TRIALS``
change it, up to 10,000 x 10) on the embedded stack (moto in-process).

Each task runs the scripted conformance agent with two tool calls: a live ``echo`` and a counter ``inc``
served by the task's fixture (fresh fixture state per trial). Prints: wall time (create -> completed), AWS
requests and bytes per task-trial made through our ports (the exact meter of ``bench.common``: the create call and
every task of the run, whatever thread ran it; the bench's own polling is not counted), Step Functions state
transitions from the execution history, and the AWS cost per task-trial at list prices (``bench/prices.py``).

Run: ``.venv/bin/python -m bench.bench_eval`` (or ``make bench``). Prints figures; asserts nothing.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from typing import Any

from bench import costs
from bench.common import TENANT, _function, api_event, call, line, start_stack, wait_execution

TASKS = int(os.environ.get("BENCH_EVAL_TASKS", "200"))
TRIALS = int(os.environ.get("BENCH_EVAL_TRIALS", "10"))
AGENT = "conformance-eval-agent"


def bench_suite(version: str) -> dict[str, Any]:
    tasks = []
    for i in range(TASKS):
        key = f"bench-{i}"
        tasks.append(
            {
                "taskId": f"task-{i:05d}",
                "input": {
                    "calls": [
                        {"tool": "conformance.eval:echo", "args": {"i": i}},
                        {"tool": "conformance.eval:counter", "args": {"op": "inc", "key": key}},
                    ],
                    "answer": f"answer-{i}",
                },
                "expected": {"kind": "golden", "match": {"strategy": "exact", "value": f"answer-{i}"}},
                "fixtures": {
                    "toolResponses": [
                        {
                            "tool": "conformance.eval:counter",
                            "args": {"op": "inc", "key": key},
                            "argsMatch": "exact",
                            "response": {"key": key, "count": 1},
                        }
                    ],
                    "onMiss": "live",
                },
            }
        )
    return {
        "suiteId": "bench.local.evals.throughput",
        "version": version,
        "modes": ["golden"],
        "trials": TRIALS,
        "tasks": tasks,
    }


def _history(sfn: Any, arn: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"executionArn": arn, "maxResults": 1000}
    while True:
        page = sfn.get_execution_history(**kwargs)
        events.extend(page["events"])
        if not page.get("nextToken"):
            return events
        kwargs["nextToken"] = page["nextToken"]


def _wait(aws: Any, run_id: str, timeout: float = 3600) -> str:
    """Poll the run item through a client the request counter does not watch (so nothing is lost or added)."""
    from shared.settings import get_settings

    ddb = aws.client("dynamodb")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        item = ddb.get_item(
            TableName=get_settings().runs_table,
            Key={"pk": {"S": run_id}, "sk": {"S": "RUN"}},
            ConsistentRead=True,
            ProjectionExpression="#s",
            ExpressionAttributeNames={"#s": "status"},
        ).get("Item")
        if item and item["status"]["S"] in ("completed", "failed", "cancelled"):
            return str(item["status"]["S"])
        time.sleep(0.05)
    raise TimeoutError(run_id)


def main() -> None:
    aws, meter = start_stack()
    from shared.services import suites
    from shared.wiring import get_ports

    ports = get_ports()
    try:
        version = f"1.0.{int(time.time()) % 100000}"
        suites.register(ports, TENANT, bench_suite(version))
        ref = f"bench.local.evals.throughput@{version}"
        body = {"mode": "eval", "evalSuiteRef": ref, "agentId": AGENT}
        warm = call(
            "create_run", api_event("POST", "/runs", "/runs", {**body, "evalSuiteRef": "conformance-eval-trajectory"})
        )
        _wait(aws, str(json.loads(warm["body"])["runId"]))  # nothing else runs while the suite is measured
        meter.reset()
        started = time.perf_counter()
        with meter.origin("create"):
            out = call("create_run", api_event("POST", "/runs", "/runs", body))
        created_requests = meter.usage("create").total()
        run_id = str(json.loads(out["body"])["runId"])
        status = _wait(aws, run_id)
        rec = ports.runs.get_run(run_id)
        assert rec is not None
        wait_execution(aws, str(rec.execution_arn), time.monotonic() + 300)
        wall = time.perf_counter() - started
        rec = ports.runs.get_run(run_id)
        assert rec is not None
        trials = TASKS * TRIALS
        print(
            f"Eval run: {TASKS} tasks x {TRIALS} trials = {trials} task-trials, 2 tool calls each "
            f"(live echo + fixture-served counter); Map MaxConcurrency {ports.settings.eval_max_concurrency}"
        )
        line("status", status)
        line("wall time, POST /runs -> completed", f"{wall:.1f}", "s")
        line("task-trials per second", f"{trials / wall:.1f}")
        line("events in the run's log", rec.last_seq + 1)
        line("AWS requests, POST /runs (create, plan, start)", created_requests)
        used = meter.usage("create", run_id)
        total = used.total()
        line("AWS requests, whole run (ports' clients)", total)
        line(
            "AWS requests per task-trial",
            f"{total / trials:.2f}",
            "(the trials' items, 98 to a transaction with the run's check (decision 0187), and the log's pages)",
        )
        line(
            "bytes sent / received per task-trial",
            f"{used.bytes_sent() // trials} / {used.bytes_received() // trials}",
            "B",
        )
        others = {
            o: n for o, n in meter.origins().items() if o.split("|", 1)[0] not in ("create", run_id, "poll", "bench")
        }
        line("requests from other origins (polling aside)", sum(others.values()), f"{others}")
        by_op = Counter({k: v for k, v in used.calls.items()})
        for op, n in by_op.most_common():
            line(f"  {op}", n, f"({n / trials:.2f} per task-trial)")
        history = _history(aws.client("stepfunctions"), str(rec.execution_arn))
        entered = sum(1 for e in history if e["type"].endswith("StateEntered"))
        kinds = Counter(e["type"] for e in history)
        line("SFN history events", len(history))
        line("SFN state transitions (StateEntered events)", entered, f"({entered / trials:.2f} per task-trial)")
        line("SFN Lambda invocations (TaskScheduled)", kinds.get("TaskScheduled", 0))
        meter.add_transitions(run_id, str(rec.execution_arn))
        # the Map's STANDARD child executions: one per batch of trials (ItemBatcher), each entering its Driver
        # choice once and its Trial state once per attempt
        attempts = (
            sum(
                n
                for f, n in meter.usage("create", run_id).invocations.items()
                if getattr(_function(f), "name", "") == "run_eval_trial"
            )
            - 1
        )  # Prepare: the same function, outside the Map
        sfn = aws.client("stepfunctions")
        map_run = sfn.list_map_runs(executionArn=str(rec.execution_arn))["mapRuns"][0]["mapRunArn"]
        batches = int(sfn.describe_map_run(mapRunArn=map_run)["executionCounts"]["total"])
        line("Map child executions (batches of trials)", batches, f"({trials / batches:.1f} task-trials each)")
        children = meter.add_map_children(run_id, batches, batches + attempts)
        line("SFN transitions of the Map's child executions", children, f"({children / trials:.2f} per task-trial)")
        used = meter.usage("create", run_id)
        line("AWS cost per 1,000 task-trials (model price aside)", costs.breakdown(used, 1000 / trials))
        _bound(aws, run_id, used, trials)
        from shared.services import summaries

        summary = summaries.stored(ports, rec) or {}
        line("summary aggregateScore / passedCount", f"{summary.get('aggregateScore')} / {summary.get('passedCount')}")
        from shared.protocol.ids import project_id

        path = f"/host/openwop-serverless/runs/{project_id(run_id)}/eval-report"
        route = "/host/openwop-serverless/runs/{runId}/eval-report"
        pages: list[tuple[float, int]] = []  # (ms, body bytes) per page
        query = "limit=1000"
        with meter.origin("report"):
            for _ in range(TASKS):  # a page holds at least one task
                t0 = time.perf_counter()
                report = call("get_eval_report", api_event("GET", path, route, query=query))
                pages.append(((time.perf_counter() - t0) * 1000, len(report["body"])))
                assert report["statusCode"] == 200, report["body"][:300]
                cursor = json.loads(report["body"]).get("nextCursor")
                if not cursor:
                    break
                query = f"limit=1000&cursor={cursor}"
        got = meter.usage("report")
        line(
            f"GET eval-report, all {len(pages)} pages of <= 1,000 tasks ({TASKS} tasks x {TRIALS} trials): "
            "AWS requests",
            got.total(),
            f"({', '.join(f'{op} {n}' for op, n in got.calls.most_common())})",
        )
        line(
            "GET eval-report: slowest page, largest page, all pages",
            f"{max(ms for ms, _ in pages):.0f} ms, {max(b for _, b in pages) // 1024} KiB,"
            f" {sum(ms for ms, _ in pages):.0f} ms / {sum(b for _, b in pages) // 1024}",
            "KiB",
        )
        _fork(aws, ports, meter, run_id, rec.last_seq + 1, trials)
    finally:
        meter.close()
        aws.stop()


def _bound(aws: Any, run_id: str, used: Any, trials: int) -> None:
    """The eval's counted cost (Lambda's measured GB-seconds aside) against its lower bound: the trials run in
    batches of the most a child execution takes (``EVAL_TRIALS_PER_BATCH``), each child 3 transitions (its start,
    the Driver choice and the Trial task) and one Lambda invocation; every stored item written once in a
    transaction (2 WRU per KB): the trials' ``TRIAL#`` items, their calls' records and the log's events (from the
    stored items)."""
    from bench import prices as p
    from bench.bench_units import _items
    from bench.trueunits import item_kb
    from shared.settings import get_settings

    stored = _items(aws, run_id) + _items(aws, run_id, "runs", "pk", "TRIAL#") + _items(aws, run_id, "tool_calls")
    wru = sum(2 * item_kb(i) for i in stored)
    parts = costs.dollars(used)
    counted = sum(parts.values()) - used.gb_seconds * p.LAMBDA_PER_GB_SECOND_ARM64
    children = -(-trials // get_settings().eval_trials_per_batch)
    bound = children * (3 * p.SFN_PER_STATE_TRANSITION + p.LAMBDA_PER_REQUEST) + wru * p.DDB_PER_WRITE_REQUEST_UNIT
    line(
        "per 1,000 task-trials: counted cost / bound (GB-seconds aside)",
        f"${counted * 1000 / trials:.4f} / ${bound * 1000 / trials:.4f}",
        f"ratio {counted / bound:.3f}; GB-seconds add ${used.gb_seconds * p.LAMBDA_PER_GB_SECOND_ARM64 * 1000 / trials:.4f}"
        f"; {used.units['wru'] / trials:.1f} WRU (bound {wru / trials:.1f}), {used.units['rru'] / trials:.2f} RRU "
        f"per task-trial",
    )


def _fork(aws: Any, ports: Any, meter: Any, run_id: str, events: int, trials: int) -> None:
    """A replay fork from 0 of the eval: its trials re-run in one task, every tool and model answer from the
    source's record (0 live calls)."""
    from shared.protocol.ids import project_id

    meter.reset()
    with meter.origin("one"):  # one read of the source log: what a replay must read at least
        ports.events.read_events(run_id)
    one = meter.usage("one").bytes_received()
    with meter.origin("needs"):  # and the rest of what it serves from: the source's call records, the plan
        ports.tool_calls.list_calls(run_id)
        from shared.engine import evalrun

        evalrun.load_plan(ports, run_id, cached=False)
    needs = one + meter.usage("needs").bytes_received()
    t0 = time.perf_counter()
    with meter.origin("fork"):
        out = call(
            "run_actions",
            api_event("POST", f"/runs/{project_id(run_id)}:fork", "/runs/{runId}", {"mode": "replay", "fromSeq": 0}),
        )
    assert out["statusCode"] == 201, out["body"][:300]
    child = str(json.loads(out["body"])["runId"])
    status = _wait(aws, child)
    rec = ports.runs.get_run(child)
    wait_execution(aws, str(rec.execution_arn), time.monotonic() + 300)
    wall = time.perf_counter() - t0
    used = meter.usage("fork", child)
    diverged = [e for e in ports.events.read_events(child) if e["type"] == "replay.diverged"]
    line(
        f"replay fork from 0 of the eval ({events:,} events): status, time",
        f"{status}, {wall:.0f} s",
        f"({len(diverged)} divergences)",
    )
    line("replay fork: AWS requests", used.total(), f"({used.total() / trials:.2f} per task-trial; {used.top(4)})")
    line(
        "replay fork: bytes read",
        f"{used.bytes_received() / 1e6:.2f} MB",
        f"{used.bytes_received() / max(1, one):.3f}x one read of the source's log ({one / 1e6:.2f} MB), "
        f"{used.bytes_received() / max(1, needs):.3f}x one read of the log, the call records and the plan "
        f"({needs / 1e6:.2f} MB)",
    )


if __name__ == "__main__":
    main()
