"""The eval report with divergences: a candidate of ``BENCH_DIVERGENCE_TASKS`` tasks (default 600; the README's
row is 10,000, one trial each) against its baseline, every other task's second tool call sent with one argument
changed, on the embedded stack.

Reads every page of ``GET /host/openwop-serverless/runs/{runId}/eval-report`` at the largest page the API allows
(``limit`` = ``MAX_PAGE_TASKS``; ``BENCH_DIVERGENCE_PAGE`` sets another) from a cold container, and prints pages,
AWS requests and bytes received through our ports, per page and in all, against a lower bound set from first
principles, not from the report's own reads. The bound is what a page with divergences cannot do without, read
from the stored items through a client the meter does not watch:

- per page: the candidate's trial items of the page's tasks, the baseline's trial items of the same tasks, and the
  candidate's tool-call records of those tasks (their provenance and misses, and the steps of their trajectories);
- once for all pages: the candidate's plan (its pointer item and, for a large plan, its S3 object);
- and, printed apart as the bound "with the run item": per page the run item (``RUN``), which every page must read
  too (is the run terminal, not erased: an erased run's other items go later, so they cannot tell).

Bytes: the stored size of those items (DynamoDB's item size, attribute names and values; an S3 object's length).
Requests: per page, at least one request per kind of item that cannot be batched with another (the candidate's
trials, the baseline's trials and the call records lie in three partitions, so three Queries, and the run item a
read by key), and one more for each further MiB a kind holds (a Query answers at most 1 MB); the plan's item and
object once. Pages: the task count over ``MAX_PAGE_TASKS``. Not in either bound: the summary (the report's header,
once), the run's facts and state items (read with the run item in one request) and the caller's API key (read
again when its 60 s cache has expired): the measured figures pay for them. The report should stay within 1.2x.

Run: ``BENCH_DIVERGENCE_TASKS=10000 .venv/bin/python -m bench.bench_divergence`` (``make bench`` runs the default
size). Prints figures; asserts nothing (least of all on time).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections import Counter
from typing import Any

from bench.bench_eval import _wait
from bench.common import TENANT, Usage, api_event, call, line, start_stack, wait_execution
from bench.trueunits import item_size

TASKS = int(os.environ.get("BENCH_DIVERGENCE_TASKS", "600"))
AGENT = "conformance-eval-agent"
SUITE = "bench.local.evals.divergence"
QUERY_BYTES = 1 << 20  # a Query answers at most 1 MB of items (as DynamoDB sizes them)


def suite(version: str, changed: bool) -> dict[str, Any]:
    tasks = []
    for i in range(TASKS):
        limit = 2 if changed and i % 2 else 1
        tasks.append(
            {
                "taskId": f"task-{i:05d}",
                "input": {
                    "calls": [
                        {"tool": "conformance.eval:echo", "args": {"i": i}},
                        {"tool": "conformance.eval:echo", "args": {"q": f"find-{i}", "opts": {"limit": limit}}},
                    ],
                    "answer": f"answer-{i}",
                },
                "expected": {"kind": "golden", "match": {"strategy": "exact", "value": f"answer-{i}"}},
                "trajectory": {
                    "match": "in-order",
                    "calls": [{"tool": "conformance.eval:echo", "args": {"q": f"find-{i}", "opts": {"limit": 1}}}],
                },
            }
        )
    return {"suiteId": SUITE, "version": version, "modes": ["golden", "regression"], "trials": 1, "tasks": tasks}


def _run(aws: Any, ports: Any, body: dict[str, Any]) -> str:
    out = call("create_run", api_event("POST", "/runs", "/runs", body))
    assert out["statusCode"] == 201, out["body"][:300]
    run_id = str(json.loads(out["body"])["runId"])
    assert _wait(aws, run_id) == "completed"
    rec = ports.runs.get_run(run_id)
    wait_execution(aws, str(rec.execution_arn), time.monotonic() + 300)
    return run_id


# --------------------------------------------------------------------------- the lower bound


class Stored:
    """The stored items the bound counts, read through clients the meter does not watch."""

    def __init__(self, aws: Any) -> None:
        from shared.settings import get_settings

        self.settings = get_settings()
        self.ddb = aws.client("dynamodb")
        self.s3 = aws.client("s3")
        self.wire = 0  # the counted items' compact wire JSON (as DynamoDB sends them), for comparison

    def _query(self, table: str, key: str, value: str, sk: tuple[str, str] | None = None) -> list[dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "TableName": table,
            "KeyConditionExpression": f"{key} = :p",
            "ExpressionAttributeValues": {":p": {"S": value}},
        }
        if sk is not None:
            kwargs["KeyConditionExpression"] += f" AND begins_with({sk[0]}, :s)"
            kwargs["ExpressionAttributeValues"][":s"] = {"S": sk[1]}
        items: list[dict[str, Any]] = []
        while True:
            page = self.ddb.query(**kwargs)
            items.extend(page["Items"])
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _object(self, key: str) -> int:
        return int(self.s3.head_object(Bucket=self.settings.fixtures_bucket, Key=key)["ContentLength"])

    def _sized(self, item: dict[str, Any], ref: str) -> tuple[int, int]:
        """(bytes, objects): the item's size, plus its S3 object's when it names one under ``ref``."""
        doc = json.loads(item["doc"]["S"]) if "doc" in item else {}
        key = item.get(ref, {}).get("S") or doc.get("blob")
        self.wire += len(json.dumps(item, separators=(",", ":")))
        return item_size(item) + (self._object(key) if key else 0), int(bool(key))

    def trials(self, run_id: str) -> dict[str, tuple[int, int]]:
        """taskId -> (stored bytes, S3 objects) of the run's trial items."""
        out: dict[str, tuple[int, int]] = {}
        for item in self._query(self.settings.runs_table, "pk", run_id, ("sk", "TRIAL#")):
            task = str(json.loads(item["doc"]["S"]).get("taskId"))
            size, objects = self._sized(item, "blob")
            old = out.get(task, (0, 0))
            out[task] = (old[0] + size, old[1] + objects)
        return out

    def calls(self, run_id: str) -> dict[str, tuple[int, int]]:
        """taskId -> (stored bytes, S3 objects) of the run's tool-call records (by the invocation that made them)."""
        out: dict[str, tuple[int, int]] = {}
        for item in self._query(self.settings.tool_calls_table, "runId", run_id):
            doc = json.loads(item["doc"]["S"]) if "doc" in item else {}
            task = str(doc.get("invocationId", "")).rsplit(":", 1)[0]
            size, objects = self._sized(item, "docRef")
            old = out.get(task, (0, 0))
            out[task] = (old[0] + size, old[1] + objects)
        return out

    def run_item(self, run_id: str) -> int:
        """The stored size of the run item (its status)."""
        return item_size(
            self.ddb.get_item(TableName=self.settings.runs_table, Key={"pk": {"S": run_id}, "sk": {"S": "RUN"}})["Item"]
        )

    def plan(self, run_id: str) -> tuple[int, int]:
        """(stored bytes, requests) of the run's plan: its item and, for a large plan, its S3 object."""
        item = self.ddb.get_item(
            TableName=self.settings.runs_table, Key={"pk": {"S": run_id}, "sk": {"S": "EVALPLAN"}}
        )["Item"]
        blob = json.loads(item["doc"]["S"]).get("planBlob")
        return item_size(item) + (self._object(blob) if blob else 0), 1 + int(bool(blob))


def page_bound(task_ids: list[str], kinds: list[dict[str, tuple[int, int]]]) -> tuple[int, int]:
    """(requests, bytes) a page of these tasks cannot go below: per kind, its items' stored size, one Query per
    started MiB (at least one), and one GetObject per item kept in S3."""
    requests = size = 0
    for kind in kinds:
        got = [kind[t] for t in task_ids if t in kind]
        held = sum(b for b, _ in got)
        requests += max(1, math.ceil(held / QUERY_BYTES)) + sum(o for _, o in got)
        size += held
    return requests, size


# --------------------------------------------------------------------------- the bench


def main() -> None:
    aws, meter = start_stack()
    from shared.engine import evalrun
    from shared.protocol.ids import project_id
    from shared.services import eval_report, suites, summaries
    from shared.wiring import get_ports

    ports = get_ports()
    page_tasks = int(os.environ.get("BENCH_DIVERGENCE_PAGE", str(eval_report.MAX_PAGE_TASKS)))
    try:
        stamp = int(time.time()) % 100000
        v1, v2 = f"1.0.{stamp}", f"2.0.{stamp}"
        suites.register(ports, TENANT, suite(v1, False))
        suites.register(ports, TENANT, suite(v2, True))
        t0 = time.perf_counter()
        base = _run(aws, ports, {"mode": "eval", "evalSuiteRef": f"{SUITE}@{v1}", "agentId": AGENT})
        cand = _run(
            aws,
            ports,
            {
                "mode": "eval",
                "evalSuiteRef": f"{SUITE}@{v2}",
                "agentId": AGENT,
                "evalModes": ["golden", "regression"],
                "baselineRunId": base,
            },
        )
        print(
            f"Eval report with divergences: {TASKS} tasks x 1 trial, 2 tool calls each, every other task's second "
            f"call with /opts/limit changed; pages of <= {page_tasks} tasks, a cold container (both runs took "
            f"{time.perf_counter() - t0:.0f} s)"
        )
        path = f"/host/openwop-serverless/runs/{project_id(cand)}/eval-report"
        route = "/host/openwop-serverless/runs/{runId}/eval-report"
        evalrun._plan_cache.clear()  # a cold container: the first page reads the plans, later ones reuse them
        summaries._summary_cache.clear()
        meter.reset()
        pages: list[tuple[list[str], Usage, int, float]] = []  # task ids, usage, body bytes, ms
        diverged = 0
        query = f"limit={page_tasks}"
        for n in range(TASKS):
            t1 = time.perf_counter()
            with meter.origin(f"page-{n}"):
                rep = call("get_eval_report", api_event("GET", path, route, query=query))
            ms = (time.perf_counter() - t1) * 1000
            assert rep["statusCode"] == 200, rep["body"][:300]
            doc = json.loads(rep["body"])
            pages.append(([t["taskId"] for t in doc["tasks"]], meter.usage(f"page-{n}"), len(rep["body"]), ms))
            diverged += sum(1 for t in doc["tasks"] if t.get("divergence"))
            if not doc.get("nextCursor"):
                break
            query = f"limit={page_tasks}&cursor={doc['nextCursor']}"

        stored = Stored(aws)
        kinds = [stored.trials(cand), stored.trials(base), stored.calls(cand)]
        plan_bytes, plan_requests = stored.plan(cand)
        run_bytes = stored.run_item(cand)
        min_pages = math.ceil(TASKS / eval_report.MAX_PAGE_TASKS)
        print(
            f"  lower bound: per page the candidate's trial items, the baseline's trial items of the same tasks "
            f"and the candidate's call records (stored size; one Query per kind and started MiB), and apart the "
            f"run item ({run_bytes} bytes, one read by key); the candidate's plan once ({plan_requests} "
            f"request(s), {plan_bytes / 1e6:.2f} MB); {min_pages} page(s) at {eval_report.MAX_PAGE_TASKS} tasks"
        )
        total = Usage()
        bound_requests = bound_bytes = 0
        for n, (task_ids, used, body, ms) in enumerate(pages):
            requests, size = page_bound(task_ids, kinds)
            if n == 0:  # the plan is read once, by the first page
                requests, size = requests + plan_requests, size + plan_bytes
            bound_requests += requests
            bound_bytes += size
            total.add(used)
            line(
                f"page {n + 1}: {len(task_ids)} tasks, requests / bound",
                f"{used.total()} / {requests}",
                f"({used.total() / requests:.2f}x; {requests + 1} with the run "
                f"item); bytes {used.bytes_received() / 1e6:.2f} / {size / 1e6:.2f} MB "
                f"({used.bytes_received() / size:.3f}x); body {body // 1024} KiB; {ms:.0f} ms",
            )
        ops: Counter[str] = total.calls
        line("pages / bound", f"{len(pages)} / {min_pages}", f"({len(pages) / min_pages:.2f}x)")
        line("tasks with a divergence", diverged, f"(of {TASKS}; expected {TASKS // 2})")
        with_run = (bound_requests + len(pages), bound_bytes + len(pages) * run_bytes)
        line(
            "AWS requests, all pages / bound",
            f"{total.total()} / {bound_requests}",
            f"({total.total() / bound_requests:.2f}x; {', '.join(f'{op} {k}' for op, k in ops.most_common())})",
        )
        line(
            "AWS requests / bound with the run item",
            f"{total.total()} / {with_run[0]}",
            f"({total.total() / with_run[0]:.2f}x)",
        )
        line(
            "bytes received from AWS, all pages / bound",
            f"{total.bytes_received() / 1e6:.2f} / {bound_bytes / 1e6:.2f} MB",
            f"({total.bytes_received() / bound_bytes:.3f}x; with the run item {with_run[1] / 1e6:.2f} MB: "
            f"{total.bytes_received() / with_run[1]:.3f}x)",
        )
        line(
            "bytes received by operation", ", ".join(f"{op} {b / 1e6:.2f} MB" for op, b in total.received.most_common())
        )
        line(
            "the bound's items in DynamoDB's compact wire JSON",
            f"{stored.wire / 1e6:.2f} MB",
            f"({stored.wire / max(1, bound_bytes - plan_bytes):.3f}x their stored size)",
        )
        line(
            "report bodies: largest page, all pages",
            f"{max(p[2] for p in pages) // 1024} KiB, {sum(p[2] for p in pages) // 1024}",
            "KiB",
        )
        line("time, all pages (not a target)", f"{sum(p[3] for p in pages):.0f}", "ms")
    finally:
        meter.close()
        aws.stop()


if __name__ == "__main__":
    main()
