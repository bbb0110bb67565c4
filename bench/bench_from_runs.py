"""Suites from recorded runs at scale (issue 24, docs/decisions/0121-from-runs-at-ten-thousand.md): one
``POST .../eval-suites/{suiteId}:from-runs`` over ``BENCH_FROM_RUNS`` recorded runs (default 200; 10,000 for the
README's row), selected by its filter, and the eval of the suite it makes (one trial a task, no ``fixtureRuns``: each
task served from its own source run), each against its lower bound in AWS requests, bytes sent and bytes read.

The recorded runs: ``BENCH_FROM_RUNS_RECORDED`` (default 10) runs of a one-node workflow whose scripted agent makes
one tool call, recorded through the API; the rest are copies of them under fresh ids, written through the ports
(``tests.workflows.copy_recorded_runs``: the same items the engine wrote, 4 requests a run, no execution).

Lower bounds (what must be read and written, in DynamoDB's wire JSON: as DynamoDB answers for bytes read, as the
SDK writes it for bytes sent; at the largest batch each request allows; docs/decisions/0121):
- ``:from-runs``: the tenant index's entries (one Query per MB); per run, its run item and creation facts, its
  pinned definition, its log's first page, keyed 0 (a short run's whole log; a Query for pages after it) and the record of
  every tool call the log shows, read by key, 100 keys to a BatchGetItem whatever run they belong to, and its
  tombstone read again after the version is stored; a link under each run, written with its tombstone check, 50 of
  each to a TransactWriteItems; the version's items (its pages, 25 to a BatchWriteItem; its head; its index row);
  the suite's listing row (its index rows and the row read, the row written); and the 3 small requests every
  version makes (the route's rate limit, the suite's index rows for the version's number, its existence). Bytes:
  those items, keys and link conditions.
- the eval: per trial, one Query of its source's call records (a trial runs alone, so it cannot share a request)
  and one transaction storing the trial (its item and its calls' records, with its run's writable check); per run,
  the links under its sources (50 to a transaction, as above), its log's pages (99 events each) 99 to a transaction
  and at least one append for prepare and each ``Finish`` page, its trials read back by ``Finish`` (one Query per
  MB), the suite read once (its head and pages), the plan written once and read once, the trials' item list written
  once, the pages' summary rows written and read back once, and the few requests a run needs to be created and
  started. Bytes: those items and objects as stored, with each write's condition.

Run: ``.venv/bin/python -m bench.bench_from_runs`` (part of ``make bench``). Prints figures; asserts nothing.
"""

from __future__ import annotations

import base64
import json
import math
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.common import TENANT, AwsMeter, Usage, api_event, call, line, start_stack, wait_status
from shared.storage.ddb import tombstone_check, writable_check

RUNS = int(os.environ.get("BENCH_FROM_RUNS", "200"))
RECORDED = int(os.environ.get("BENCH_FROM_RUNS_RECORDED", "10"))
AGENT = "conformance-eval-agent"
SUITE = "bench.local.evals.from-runs"
ROUTE = "/host/openwop-serverless/eval-suites/{suiteId}"
MB = 1024 * 1024


def _plain(v: Any) -> Any:
    if isinstance(v, bytes | bytearray):
        return base64.b64encode(v).decode()
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def _wire(value: Any) -> int:
    """Bytes of a low-level (typed) DynamoDB item or key as DynamoDB answers it (compact JSON, binary as base64)."""
    return len(json.dumps(_plain(value), separators=(",", ":")))


def _sdk(value: Any) -> int:
    """The same as the SDK sends it (botocore writes its JSON bodies with ``json.dumps``'s default separators)."""
    return len(json.dumps(_plain(value)))


def _condition(action: dict[str, Any]) -> int:
    """The bytes of a transaction's condition as the host writes it: its key and expression (the table aside)."""
    (spec,) = action.values()
    return _sdk({k: v for k, v in spec.items() if k != "TableName"})


def _scan(ddb: Any, table: str, keep: Any) -> list[dict[str, Any]]:
    """Every item of ``table`` that ``keep`` accepts (through a client the meter does not watch)."""
    out: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table}
    while True:
        page = ddb.scan(**kwargs)
        out.extend(i for i in page.get("Items", []) if keep(i))
        if not page.get("LastEvaluatedKey"):
            return out
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _ratio_lines(label: str, used: Usage, requests: int, sent: int, read: int) -> None:
    line(
        f"{label}: AWS requests / bound / ratio",
        f"{used.total():,} / {requests:,} / {used.total() / requests:.3f}",
        f"{dict(used.calls.most_common())}",
    )
    line(
        f"{label}: bytes sent / bound / ratio",
        f"{used.bytes_sent() / 1e6:.2f} / {sent / 1e6:.2f} MB / {used.bytes_sent() / sent:.3f}",
    )
    line(
        f"{label}: bytes read / bound / ratio",
        f"{used.bytes_received() / 1e6:.2f} / {read / 1e6:.2f} MB / {used.bytes_received() / read:.3f}",
    )
    if os.environ.get("BENCH_FROM_RUNS_DETAIL"):
        for op, n in used.calls.most_common():
            line(f"  {op}", n, f"sent {used.sent[op]:,} B, read {used.received[op]:,} B")


@contextmanager
def _handler_cpu(meter: AwsMeter, origin: str) -> Iterator[list[float]]:
    """The CPU seconds of the threads serving the request: its own and the workers ``common.parallel`` starts for it
    (their tasks are timed as they are submitted under ``origin``); moto's server threads are not among them."""
    from concurrent import futures

    spent = [0.0]
    lock = threading.Lock()
    plain = futures.ThreadPoolExecutor

    class Timed(plain):  # type: ignore[misc,valid-type]
        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            if meter.current() != origin:
                return super().submit(fn, *args, **kwargs)

            def timed(*a: Any, **k: Any) -> Any:
                began = time.thread_time()
                try:
                    return fn(*a, **k)
                finally:
                    with lock:
                        spent[0] += time.thread_time() - began

            return super().submit(timed, *args, **kwargs)

    futures.ThreadPoolExecutor = Timed  # type: ignore[misc]
    began = time.thread_time()
    try:
        yield spent
    finally:
        futures.ThreadPoolExecutor = plain  # type: ignore[misc]
        spent[0] += time.thread_time() - began


def _record(ports: Any, meter: AwsMeter) -> tuple[str, list[str]]:
    """``RUNS`` recorded runs of one workflow: ``RECORDED`` through the API, the rest copies of them."""
    from shared.services.workflows import register_workflow
    from tests.workflows import copy_recorded_runs, scripted_agent

    workflow_id = register_workflow(ports, TENANT, scripted_agent("bench-from-runs"))
    started = time.monotonic()
    recorded = []
    with meter.origin("seed"):
        for i in range(min(RECORDED, RUNS)):
            script = {
                "calls": [{"tool": "conformance.eval:echo", "args": {"customerId": f"c-{i}"}}],
                "answer": f"answer-{i}",
            }
            out = call(
                "create_run",
                api_event("POST", "/runs", "/runs", {"workflowId": workflow_id, "inputs": {"script": script}}),
            )
            recorded.append(str(json.loads(out["body"])["runId"]))
        for run_id in recorded:
            assert wait_status(ports, run_id) == "completed", run_id
        copies = copy_recorded_runs(recorded, RUNS - len(recorded)) if RUNS > len(recorded) else []
    from shared.local.ddb_streams import wait_for_stream_idle

    wait_for_stream_idle(600)
    line(
        f"{RUNS:,} recorded runs ({len(recorded)} through the API, {len(copies):,} copies)",
        f"{time.monotonic() - started:.0f}",
        "s",
    )
    return workflow_id, recorded + copies


def main() -> None:
    aws, meter = start_stack()
    from shared.settings import get_settings
    from shared.wiring import get_ports

    ports = get_ports()
    settings = get_settings()
    ddb = aws.client("dynamodb")  # not watched by the meter: the bounds' own reads
    try:
        workflow_id, runs = _record(ports, meter)
        print(
            f"Suites from recorded runs: {RUNS:,} runs of a one-node workflow, its scripted agent making one tool call"
        )
        path = ROUTE.replace("{suiteId}", SUITE) + ":from-runs"
        meter.reset()
        t0 = time.perf_counter()
        with meter.origin("from-runs"), _handler_cpu(meter, "from-runs") as cpu:
            out = call(
                "manage_eval_suites",
                api_event("POST", path, ROUTE, {"agentId": AGENT, "workflowId": workflow_id, "limit": RUNS}),
            )
        took = time.perf_counter() - t0
        assert out["statusCode"] == 201, out["body"][:500]
        made = json.loads(out["body"])
        used = meter.usage("from-runs")
        line(
            f":from-runs of {RUNS:,} runs",
            f"{made['taskCount']:,} tasks, {took:.1f} s locally",
            f"(other origins: {meter.unattributed('from-runs')} requests)",
        )
        line(
            ":from-runs: CPU of the handler's threads (moto's aside, the meter's own parsing in)",
            f"{cpu[0]:.1f} s",
            f"({cpu[0] * 1000 / RUNS:.2f} ms a run)",
        )
        _from_runs_bound(ddb, settings, ports, used, set(runs), made)
        _eval(aws, ports, meter, ddb, settings, str(made["evalSuiteRef"]), set(runs))
    finally:
        meter.close()
        aws.stop()


def _from_runs_bound(ddb: Any, settings: Any, ports: Any, used: Usage, runs: set[str], made: dict[str, Any]) -> None:
    """The bound of the module's docstring, from the items as stored (read through an unwatched client)."""
    ref = f"{made['suiteId']}@{made['version']}"
    run_items = _scan(
        ddb, settings.runs_table, lambda i: i["pk"]["S"] in runs and i["sk"]["S"] in ("RUN", "RUN#FACTS", "DEFINITION")
    )
    links = _scan(ddb, settings.runs_table, lambda i: i["pk"]["S"] in runs and i["sk"]["S"].startswith("SUITELINK#"))
    index = _scan(ddb, settings.runs_table, lambda i: i["pk"]["S"] in runs and i["sk"]["S"] == "RUN#INDEX")
    events = _scan(ddb, settings.events_table, lambda i: i["runId"]["S"] in runs)
    calls = _scan(ddb, settings.tool_calls_table, lambda i: i["runId"]["S"] in runs)
    version = _scan(
        ddb,
        settings.host_table,
        lambda i: (
            i["sk"]["S"].startswith(ref)
            and i["pk"]["S"] in (f"SUITE#{TENANT}", f"SUITEPAGE#{TENANT}", f"SUITEIDX#{TENANT}")
        ),
    )
    pages = [i for i in version if i["pk"]["S"].startswith("SUITEPAGE#")]
    n = len(runs)
    from shared.storage.eventpages import bounds

    ends: dict[str, int] = {}  # each run's last sequence
    for i in events:
        ends[i["runId"]["S"]] = max(ends.get(i["runId"]["S"], -1), bounds(i)[1])
    # each run's item keyed 0: its log's first page (a short run's whole log), read by key
    last = {i["runId"]["S"]: i for i in events if int(i["seq"]["N"]) == 0}
    earlier = {r for r, i in last.items() if bounds(i)[1] < ends[r]}  # runs with pages after it
    keys = {
        "runs": [{k: i[k] for k in ("pk", "sk")} for i in run_items if i["sk"]["S"] != "DEFINITION"],
        "logs": [{k: i[k] for k in ("pk", "sk")} for i in run_items if i["sk"]["S"] == "DEFINITION"]
        + [{k: i[k] for k in ("runId", "seq")} for i in last.values()],
        "calls": [{k: i[k] for k in ("runId", "callKey")} for i in calls],
        "tombstones": [ports.runs._tombstones.key(r) for r in runs],
    }  # type: ignore[attr-defined]
    index_bytes = sum(_wire(i) for i in index)
    # four rounds of reads, each waiting on the one before (a log's first page after its run, a call's key its
    # log, the tombstones the stored version), 100 keys a request, and a Query of a log's later pages; the index,
    # 1 MB a Query; the listing: the suite's index rows and listing row read, the listing row written
    requests = (
        sum(math.ceil(len(k) / 100) for k in keys.values())
        + len(earlier)
        + max(1, math.ceil(index_bytes / MB))
        + math.ceil(n / 50)
        + math.ceil(len(pages) / 25)
        + 2
        + 3
        + 3
    )
    sent = (
        sum(_sdk(k) for ks in keys.values() for k in ks)
        + sum(_sdk(i) for i in links)
        + sum(
            _condition(
                tombstone_check(
                    settings.runs_table,
                    ports.runs._tombstones,  # type: ignore[attr-defined]
                    i["pk"]["S"],
                )
            )
            for i in links
        )
        + sum(_sdk(i) for i in version)
    )
    read = sum(_wire(i) for i in run_items + events + calls) + index_bytes
    stored = sum(_wire(i) for i in version) / 1e3
    line(
        "needed per run",
        f"{sum(len(k) for k in keys.values()) / n:.1f} keys, {read / n:,.0f} B read",
        f"({len(events) / n:.1f} log pages, {len(calls) / n:.1f} call records); the version {stored:,.0f} KB in "
        f"{len(version)} items, {len(pages)} of them pages (a version one compressed item holds has none)",
    )
    _ratio_lines(":from-runs", used, requests, sent, read)


def _eval(aws: Any, ports: Any, meter: AwsMeter, ddb: Any, settings: Any, ref: str, runs: set[str]) -> None:
    from bench.bench_eval import _wait

    warm = call(
        "create_run",
        api_event(
            "POST", "/runs", "/runs", {"mode": "eval", "agentId": AGENT, "evalSuiteRef": "conformance-eval-trajectory"}
        ),
    )
    _wait(aws, str(json.loads(warm["body"])["runId"]))  # a warm container, as a steady host has
    meter.reset()
    t0 = time.perf_counter()
    with meter.origin("create"):
        out = call(
            "create_run", api_event("POST", "/runs", "/runs", {"mode": "eval", "evalSuiteRef": ref, "agentId": AGENT})
        )
    assert out["statusCode"] == 201, out["body"][:500]
    created = meter.usage("create")
    run_id = str(json.loads(out["body"])["runId"])
    status = wait_status(ports, run_id, meter, timeout=7200)
    took = time.perf_counter() - t0
    used = meter.usage("create", run_id)
    from shared.services import summaries

    rec = ports.runs.get_run(run_id)
    summary = summaries.stored(ports, rec) or {}
    tasks = summary.get("tasks") or []
    passed = sum(1 for t in tasks if t.get("passed") and not t.get("fixtureMissCount"))
    line(
        f"eval of that suite: {len(tasks):,} tasks x 1 trial, no fixtureRuns",
        f"{status}, {took:.0f} s locally",
        f"{passed:,} passed with 0 misses; POST /runs {created.total()} requests {dict(created.calls)}",
    )
    _eval_bound(ddb, settings, ports, used, run_id, runs, ref, rec.last_seq + 1)


def _eval_bound(
    ddb: Any, settings: Any, ports: Any, used: Usage, run_id: str, runs: set[str], ref: str, events_n: int
) -> None:
    """The bound of the module's docstring, from the items and objects as stored."""
    own = _scan(ddb, settings.runs_table, lambda i: i["pk"]["S"] == run_id)
    trials = [i for i in own if i["sk"]["S"].startswith("TRIAL#")]
    plan_item = [i for i in own if i["sk"]["S"] == "EVALPLAN"]
    children = _scan(ddb, settings.runs_table, lambda i: i["pk"]["S"] in runs and i["sk"]["S"] == f"CHILD#{run_id}")
    events = _scan(ddb, settings.events_table, lambda i: i["runId"]["S"] == run_id)
    calls = _scan(ddb, settings.tool_calls_table, lambda i: i["runId"]["S"] == run_id)
    sources = _scan(ddb, settings.tool_calls_table, lambda i: i["runId"]["S"] in runs)
    suite = _scan(
        ddb,
        settings.host_table,
        lambda i: i["sk"]["S"].startswith(ref) and i["pk"]["S"] in (f"SUITE#{TENANT}", f"SUITEPAGE#{TENANT}"),
    )
    reference = _scan(
        ddb, settings.host_table, lambda i: i["pk"]["S"] == f"SUITEREF#{TENANT}" and i["sk"]["S"].endswith(run_id)
    )
    objects = _objects(settings, run_id)
    ours = {k: v for k, v in objects.items() if not k.startswith("eval-map/")}  # the Map's results: Step Functions'
    rows = [k for k in ours if k.startswith("eval-rows/")]
    plan_s3 = "eval-plan.json" in ours
    n = len(trials)
    appends = max(2 + len(rows), math.ceil(len(events) / 99))  # prepare's, then each Finish page's; 99 pages a request
    trial_bytes = sum(_wire(i) for i in trials)
    page_bytes = sum(_wire(i) for i in suite if i["pk"]["S"].startswith("SUITEPAGE#"))
    requests = (
        2 * n  # per trial: its source's records (Query), its item with its calls' records (transaction)
        + math.ceil(len(children) / 50)  # the links under the sources
        + appends  # the log: its pages (99 events each), 99 to a transaction, one append a Finish page
        + 10  # create: rate limit, suite, the agent's version (2), run items, reference + its link, plan, start
        + (max(1, math.ceil(page_bytes / MB)) if page_bytes else 0)
        + 2 * plan_s3  # suite pages; plan in S3
        + 3  # prepare: the run, the plan, the trials' list
        + 1  # the trials: the run, once
        + len(rows)
        + 1
        + max(len(rows) + 1, math.ceil(trial_bytes / MB))  # Finish: the run a page, its trials
        + 2 * len(rows)
        + ("eval-summary.json" in ours)
    )  # the pages' rows out and back, a large summary
    sent = (
        sum(_sdk(i) for i in own + events + calls + children + reference)
        + sum(ours.values())
        + sum(
            _condition(
                tombstone_check(
                    settings.runs_table,
                    ports.runs._tombstones,  # type: ignore[attr-defined]
                    i["pk"]["S"],
                )
            )
            for i in children
        )
        + n * _condition(writable_check(settings.runs_table, run_id))
        + appends
        * _sdk(
            {
                "Key": {"pk": {"S": run_id}, "sk": {"S": "RUN"}},
                "UpdateExpression": "SET lastSeq = :l",
                "ConditionExpression": "lastSeq = :p",
                "ExpressionAttributeValues": {":l": {"N": str(events_n)}, ":p": {"N": str(events_n)}},
            }
        )
    )
    read = (
        sum(_wire(i) for i in sources + suite + trials)
        + sum(objects.get(k, 0) for k in rows)
        + (objects["eval-plan.json"] if plan_s3 else sum(_wire(i) for i in plan_item))
    )
    line(
        "eval: stored",
        f"{n:,} trials ({trial_bytes / max(1, n):,.0f} B each), {len(events):,} log pages, "
        f"{len(calls):,} call records, {len(children):,} links, S3 {dict(Counter(k.split('/')[0] for k in ours))}",
    )
    _ratio_lines("eval", used, requests, sent, read)


def _objects(settings: Any, run_id: str) -> dict[str, int]:
    import boto3

    s3 = boto3.client("s3")
    prefix = f"runs/{run_id}/"
    out: dict[str, int] = {}
    kwargs: dict[str, Any] = {"Bucket": settings.fixtures_bucket, "Prefix": prefix}
    while True:
        page = s3.list_objects_v2(**kwargs)
        out.update({o["Key"][len(prefix) :]: int(o["Size"]) for o in page.get("Contents", [])})
        if not page.get("IsTruncated"):
            return out
        kwargs["ContinuationToken"] = page["NextContinuationToken"]


if __name__ == "__main__":
    main()
