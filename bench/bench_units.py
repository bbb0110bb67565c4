"""Honest costs (issue 27): DynamoDB capacity units per operation against a stated lower bound, at 1,000, 10,000 and
100,000 events (``BENCH_UNITS_SIZES``, comma-separated; about 10 minutes in all here), with the stream consumers' work
counted against the run.

Each row is one operation's work as the exact meter of ``bench.common`` sees it: the API call, every task of the run
or fork it caused and the webhook fan-out of its events (the events table's stream, attributed to the run). Write
units are billed per 1 KB of an item (2 in a transaction), read units per 4 KB read (half when eventually
consistent); both from true item sizes (DynamoDB's size rules, ``bench.trueunits``: a binary attribute its raw bytes,
not its base64), as the meter sizes request and response items. Beside each row, the **independent meter**
(``bench.trueunits.TrueUnits``) counts the same requests from the items as stored, read before and after each write
(an update is billed on the larger) and whole for each read (a projection reads the whole item), and prints how far
the exact meter is from it.

``BENCH_UNITS_SUBSCRIBED_SIZES`` (default: the same) sets the runs whose fan-out is measured with a subscriber to every
event; their deliveries are held (they are ``bench_webhooks``' figures, not the fan-out's work).

Lower bounds, from the stored items themselves (read afterwards through a client the meter does not watch):

- **live run**: its log written once, as decision 0170 appends it: each Advance task's first and last append a
  transaction with the log's head (2 WRU per KB of its page, a page being up to 99 consecutive events, compressed,
  and 2 WRU for the head, the run item, under 1 KB), its middle pages plain conditional puts (1 WRU per KB); its own
  items (run, facts, pinned definition, state, index entry) once, in the transaction that creates the run only if no
  tombstone forbids it (2 WRU per KB each), and the index entry once more when the run ends (its status is a listed
  field); its definition read once, strongly consistent (the tenant's registration: read-your-writes), and its own
  run items once, eventually consistent, by the task that runs it (its create runs in another function and an
  execution may carry no run data), and its tenant's interest (webhook subscriptions, sampling rules' version) once,
  eventually consistent, by the fan-out of its events (it cannot deliver or skip them without it); nothing else (a
  later task's read of its run, its status reads and the fan-out's further Queries, one per 2 s of events a warm
  process, are the design's, not the work's);
- **branch fork from k**: its prefix copied once (1 WRU per KB of each page it copies into), its own events as a live
  run's, its own items as a live run's and its lineage link under the source (``CHILD#``, in the same creation
  transaction: the source's erasure reaches the fork through it); the source's pages that hold its prefix read once,
  eventually consistent (0.5 RRU per 4 KB), and what the request must read besides (``_fork_reads``): the source's
  run items once, eventually consistent, the item holding the source's first event once more, eventually consistent
  (the protocol's synchronous 410 for a history purged from its start), and the definition it runs, the tenant's registration, once strongly
  consistent (read-your-writes: a definition registered a moment before is the one the fork runs), and its own run
  items once, eventually consistent, by the task that runs it (as a live run's);
- **replay fork from 0**: its events as a live run's, its own items and link as a branch's; the whole source log read
  once (0.5 RRU per 4 KB), the source's run items, first event and definition as a branch's, and the source's recorded tool
  calls once, eventually consistent (a read of nothing costs 0.5);
- **fan-out without a subscriber**: its tenant's interest read once (0.5 RRU); **with one** (every event type): that,
  the run's creation facts read once (its fork rule and tags), eventually consistent, and one SQS FIFO request per 10
  messages (one per event); nothing written in DynamoDB. Its invocations per 1,000 events are printed against the bound
  of decision 0151 (at most 1: the mapping's batching window takes many pages per invocation), beside what the
  window added to a delivery's lag (the seconds the window held each batch once its lane was free, median and
  most: a batch queued behind a busy handler waits for it whatever the window). The local window is the deployed
  one here (``LOCAL_STREAM_BATCHING_WINDOW_SECONDS`` unless set).

Each row also prints its **physical** bound: the same items and reads, every item written once with a plain write
(1 WRU per KB; no transaction, no head rewritten per page), what the work must cost with the cheapest correct API
(issue 38). The design's bound above is what today's appends (transactions that move the head) must cost.
A live run's row is followed by the least any design writes while a run's creation and end stay atomic
(``_atomic_floor``: its pages once and plain, its create and its end one transaction each, with and without its
tenant's cap and start outbox), against that physical bound: what a row's ratio can fall to at this size.

The ratio is DynamoDB dollars measured / bound (write and read units at their prices); each row also prints each
dimension against its own physical bound (write units, read units and requests: a live run's against P + 5, its
pages, its create, its start and the three reads it must make, its definition's, its own run's and the fan-out's of
its tenant's interest; a fork's against ``_fork_requests``, its pages, copies and source reads besides). The other services' cost is
printed beside it. Run: ``.venv/bin/python -m bench.bench_units`` (part of ``make bench``). Prints; asserts nothing.
"""

from __future__ import annotations

import base64
import json
import math
import os
import time
from typing import Any

from bench import costs
from bench import prices as p
from bench.bench_cost import _fork
from bench.bench_host import _create
from bench.common import TENANT, AwsMeter, Usage, api_event, call, line, metered_clients, start_stack, wait_status
from bench.trueunits import TrueUnits, item_kb, item_size
from shared import manifest


def _wire_len(value: Any) -> int:
    """Its length in DynamoDB's wire JSON (binary values as base64, as they travel), as the meter counts items."""
    return len(json.dumps(value, separators=(",", ":"), default=lambda b: base64.b64encode(b).decode("ascii")))


def _items(aws: Any, run_id: str, table: str = "events", key: str = "runId", prefix: str = "") -> list[dict[str, Any]]:
    """A run's items of one table as DynamoDB holds them (wire form), in key order (by default its events); read
    through a client the meter does not watch."""
    from shared.settings import get_settings

    ddb, out = aws.client("dynamodb"), []
    kwargs: dict[str, Any] = {
        "TableName": getattr(get_settings(), f"{table}_table"),
        "KeyConditionExpression": f"{key} = :r",
        "ExpressionAttributeValues": {":r": {"S": run_id}},
    }
    if prefix:
        kwargs["KeyConditionExpression"] += " AND begins_with(sk, :s)"
        kwargs["ExpressionAttributeValues"][":s"] = {"S": prefix}
    while True:
        page = ddb.query(**kwargs)
        out.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return out
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _ec(n: int) -> float:
    """Read units of ``n`` bytes read eventually consistently (0.5 per 4 KB, at least 0.5)."""
    return 0.5 * max(1, math.ceil(n / 4096))


def _definition_reads(aws: Any, workflow_id: str) -> float:
    """Read units of the definition a run or fork runs, the tenant's registration read once strongly consistent (a
    definition registered a moment before is the one it must run: read-your-writes)."""
    from shared.settings import get_settings
    from shared.storage.workflows import WORKFLOW_PREFIX

    key = {"pk": {"S": f"{WORKFLOW_PREFIX}{TENANT}"}, "sk": {"S": workflow_id}}
    registration = aws.client("dynamodb").get_item(TableName=get_settings().host_table, Key=key)["Item"]
    return 2 * _ec(item_size(registration))


def _run_reads(aws: Any, run_id: str) -> float:
    """Read units of a run's items (``RUN`` to ``RUN#STATE``, as stored) read once, eventually consistent."""
    from shared.storage.schema import RUN_SK, RUN_STATE_SK

    return _ec(_size([i for i in _items(aws, run_id, "runs", "pk") if RUN_SK <= i["sk"]["S"] <= RUN_STATE_SK]))


def _interest_reads(aws: Any) -> float:
    """Read units of the fan-out's one read of the tenant's interest (its webhook subscriptions and its sampling
    rules' version: the ``WEBHOOK#<tenant>`` partition as stored), eventually consistent: whatever a run's events
    are, the fan-out cannot deliver or skip them without knowing it, and no write path can tell a stateless fan-out
    (decision 0181). Its reads again while the events flow (one per 2 s a warm process, decision 0116: what makes a
    registration apply within seconds) are the design's."""
    from shared.storage.webhooks import SUB_PK

    return _ec(_size(_items(aws, f"{SUB_PK}{TENANT}", "host", "pk")))


def _live_reads(aws: Any, run_id: str, workflow_id: str) -> tuple[float, str]:
    """Read units a live run must spend (issue 38): the definition it runs (``_definition_reads``), its own run
    items once, eventually consistent, by the task that runs it (its create runs in another function, and an
    execution may carry no run data: its input and history outlive an erasure, decision 0177), and its tenant's
    interest once, by the fan-out of its events (``_interest_reads``). Everything else it reads (a later task's
    read of its run, its status reads, the fan-out's further Queries) is the design's."""
    parts = {
        "definition": _definition_reads(aws, workflow_id),
        "own run": _run_reads(aws, run_id),
        "fan-out interest": _interest_reads(aws),
    }
    return sum(parts.values()), ", ".join(f"{k} {v:g}" for k, v in parts.items())


def _fork_reads(aws: Any, source: str, fork: str, workflow_id: str, mode: str, prefix_bytes: int) -> tuple[float, str]:
    """Read units a fork must spend, each read once with the cheapest correct API (issue 38): its source's prefix
    and its source's run items (what the request checks: it exists and is the caller's), eventually consistent;
    the item holding its source's first event, eventually consistent, by the request (the protocol's synchronous
    ``410 run_expired`` for a history purged from its start: the request must answer before any task reads the
    prefix, and an execution carries no events, so the page is read again by the task that copies or indexes it);
    the definition it runs (``_definition_reads``); its own run items once, eventually consistent, by the task that
    runs it, and its tenant's interest once, by the fan-out (as a live run's, ``_live_reads``); and for a replay its
    source's recorded tool calls (eventually consistent, at least a read of nothing). With the parts, for the row."""
    parts = {
        "prefix": _ec(prefix_bytes),
        "source start": _ec(item_size(_items(aws, source)[0])),
        "source run": _run_reads(aws, source),
        "definition": _definition_reads(aws, workflow_id),
        "own run": _run_reads(aws, fork),
        "fan-out interest": _interest_reads(aws),
    }
    if mode == "replay":
        parts["tool calls"] = _ec(_size(_items(aws, source, "tool_calls")))
    return sum(parts.values()), ", ".join(f"{k} {v:g}" for k, v in parts.items())


QUERY_BYTES = 1024 * 1024  # what one Query answers at most
BATCH_WRITE_ITEMS = 25  # items one BatchWriteItem takes


def _fork_requests(appended: int, copied: int, prefix_bytes: int, mode: str) -> tuple[int, str]:
    """Requests a fork must send (issue 38): its own pages (P, one put or transaction each), its copied prefix's
    pages in BatchWriteItems of 25, the source's pages it must read in Queries of up to 1 MB, its create and its
    start, and one request for each other read ``_fork_reads`` counts (its source's first event, its source's run,
    its definition, its own run, its tenant's interest, and a replay's tool calls)."""
    batches = math.ceil(copied / BATCH_WRITE_ITEMS)
    queries = max(1, math.ceil(prefix_bytes / QUERY_BYTES))
    fixed = 2 + 5 + (1 if mode == "replay" else 0)
    label = f"P + {batches} + {queries} + {fixed}" if batches else f"P + {queries} + {fixed}"
    return appended + batches + queries + fixed, label


def _first(item: dict[str, Any]) -> int:
    """The first sequence a stored log item holds (either layout)."""
    from shared.storage.eventpages import bounds

    return bounds(item)[0]


def _wire(items: list[dict[str, Any]]) -> int:
    return sum(_wire_len(i) for i in items)


def _size(items: list[dict[str, Any]]) -> int:
    return sum(item_size(i) for i in items)


def _write_bounds(pages: list[dict[str, Any]], tasks: int, own_kb: int, copied_kb: int = 0) -> tuple[int, int]:
    """Write units of a run's work: appending its ``pages`` over ``tasks`` Advance tasks, its own items (``own_kb``)
    and a copied prefix (``copied_kb``, plain writes either way). The design's (decision 0170): each task's first
    and last append a transaction (its page at 2 per KB and the head, under 1 KB, at 2), its middle pages plain (1
    per KB), its own items in transactions (2 per KB). The physical: every item written once with a plain write (1
    per KB), no head rewritten."""
    page_kb = sum(item_kb(i) for i in pages)
    txs = min(len(pages), 2 * max(1, tasks))
    design = copied_kb + page_kb + math.ceil(txs * page_kb / max(1, len(pages))) + 2 * txs + 2 * own_kb
    return design, copied_kb + page_kb + own_kb


def _own_kb(aws: Any, run_id: str, parent: str | None = None) -> int:
    """KB of the run's own items (run, facts, pinned definition, state, index entry, ...) written once (its creation,
    conditioned on no tombstone), and its index entry's one necessary move (its status, a listed field, is terminal
    at the end); a fork's lineage link under its ``parent`` (how the parent's erasure reaches it) is one of its
    items."""
    from shared.keys import CHILD_PREFIX
    from shared.storage.schema import RUN_INDEX_SK

    own = _items(aws, run_id, "runs", "pk")
    if parent is not None:
        own += _items(aws, parent, "runs", "pk", prefix=f"{CHILD_PREFIX}{run_id}")
    return sum(item_kb(i) for i in own) + sum(item_kb(i) for i in own if i["sk"]["S"] == RUN_INDEX_SK)


def _atomic_floor(aws: Any, run_id: str, pages: list[dict[str, Any]]) -> tuple[int, int]:
    """The least a run's writes can be while its creation and its end stay atomic ("nothing half-written"), from
    its stored items' true sizes: its pages written once, plainly; its creation one transaction (2 per KB) of its own
    items (run, facts, state, index entry); its end one transaction of the items an end moves (run, state, index
    entry); nothing else (no status move, rate bucket or page in a transaction). Answered twice: with its tenant's cap
    and its start outbox (the slot counter, the run's slot and its start marker, under 1 KB each, in both
    transactions: taken and put, given back and deleted), and with neither."""
    from shared.storage.schema import RUN_INDEX_SK, RUN_SK, RUN_STATE_SK

    own = {i["sk"]["S"]: item_kb(i) for i in _items(aws, run_id, "runs", "pk")}
    created = sum(own.values())
    ended = sum(own.get(sk, 0) for sk in (RUN_SK, RUN_STATE_SK, RUN_INDEX_SK))
    pages_kb = sum(item_kb(p) for p in pages)
    bare = pages_kb + 2 * created + 2 * ended
    return bare + 2 * 3 + 2 * 3, bare


def _append_alternatives(label: str, aws: Any, run_id: str, pages: list[dict[str, Any]], events: list[Any]) -> None:
    """What the live run's appends would write under each design of decision 0170, from its stored items (true
    sizes): its pages, its run item (the head) as stored, and its events repacked for bigger flushes."""
    from shared.storage.schema import MAX_EVENTS_PER_PAGE, RUN_SK, TTL_ATTRIBUTE

    head = next(i for i in _items(aws, run_id, "runs", "pk") if i["sk"]["S"] == RUN_SK)
    head_kb, page_kb, n = item_kb(head), sum(item_kb(i) for i in pages), len(pages)
    from shared.wiring import get_ports

    expires_at = int(pages[0][TTL_ATTRIBUTE]["N"])
    repacked = get_ports().events._pages(run_id, events, expires_at, 4 * MAX_EVENTS_PER_PAGE)  # type: ignore[attr-defined]
    big_kb, big_n = sum(item_kb(p.item) for p in repacked), len(repacked)
    rows = {
        "before decision 0170 (a transaction per page: the page and the head, 2 per KB each)": (
            2 * (page_kb + head_kb * n),
            n,
        ),
        "a conditional head update, then the page plain (a crash between leaves a hole)": (
            page_kb + head_kb * n,
            2 * n,
        ),
        "the page as the commit (keyed by its first sequence, attribute_not_exists)": (page_kb, n),
        f"those transactions, flushes of up to {4 * MAX_EVENTS_PER_PAGE} events": (
            2 * (big_kb + head_kb * big_n),
            big_n,
        ),
    }
    for name, (wru, requests) in rows.items():
        line(
            f"{label}: appends, {name}",
            f"{wru:,} WRU",
            f"{wru / page_kb:.2f}x the pages written once plain ({page_kb:,} WRU); {requests:,} requests",
        )


def _ddb_usd(wru: float, rru: float) -> float:
    return wru * p.DDB_PER_WRITE_REQUEST_UNIT + rru * p.DDB_PER_READ_REQUEST_UNIT


def _times(measured: float, bound: float) -> str:
    return f"{measured / bound:.2f}x" if bound else "bound 0"


def _row(
    label: str,
    used: Usage,
    writes: tuple[int, int],
    rru_bound: float,
    true: Any = None,
    requests: tuple[int, str] | None = None,
    reads: str = "",
) -> float:
    """One row against the design's bound and the physical one (``writes``: their write units; the same reads), and
    the independent meter's units (``true``: ``TrueUnits`` counts of the same origins) beside the exact meter's.
    Each dimension is also printed against its own physical bound (issue 38: write units, read units and, with
    ``requests`` = (bound, how it is made), requests: a live run's P + 5, its pages, its create, its start, and the
    three reads it must make, its definition's, its own run's and its tenant's interest, as its read units count
    them; a fork's ``_fork_requests``)."""
    wru_bound, physical_wru = writes
    measured = _ddb_usd(used.units["wru"], used.units["rru"])
    bound = _ddb_usd(wru_bound, rru_bound)
    ratio = measured / bound if bound else float("inf")
    floor = _ddb_usd(physical_wru, rru_bound)
    sent = f", requests {_times(used.total(), requests[0])} of {requests[1]} = {requests[0]:,}" if requests else ""
    line(
        f"{label}: WRU / RRU",
        f"{used.units['wru']:,} / {used.units['rru']:,.1f}",
        f"design bound {wru_bound:,} / {rru_bound:,.1f}, ratio {ratio:.3f}; physical bound {physical_wru:,} / "
        f"{rru_bound:,.1f}, ratio {measured / floor if floor else float('inf'):.3f}; each against its physical bound: "
        f"WRU {_times(used.units['wru'], physical_wru)}, RRU {_times(used.units['rru'], rru_bound)}"
        f"{f' (of what it must read: {reads})' if reads else ''}{sent}; "
        f"{used.total():,} requests; all services {costs.breakdown(used)}; units {used.units_by_operation()}",
    )
    if true is not None:
        by_op = {k: v for k, v in true.most_common() if " " in k and not k.startswith("item ")}
        line(
            f"{label}: independent meter", f"{true['wru']:,} / {true['rru']:,.1f}", f"{_agreement(used, true)}; {by_op}"
        )
        index = int(true["gsi"])
        line(
            f"{label}: index writes",
            f"{index:,} WRU",
            f"the tenant index's (GSI, projection ALL) writes its items cause, not in the rows' WRU above (the requests do "
            f"not show them): with them {used.units['wru'] + index:,} WRU, "
            f"{_times(used.units['wru'] + index, physical_wru + 1)} of the physical bound with the index entry's once",
        )
    return ratio


def _agreement(used: Usage, true: Any) -> str:
    """How far the exact meter's units are from the independent meter's (true sizes, items read around each
    request), in per cent of the latter."""

    def off(name: str) -> str:
        mine, theirs = float(used.units[name]), float(true[name])
        return f"{(mine - theirs) * 100 / theirs:+.1f}%" if theirs else ("0" if not mine else "n/a")

    unsized = f"; {true['unsized']} requests it could not size" if true["unsized"] else ""
    return (
        f"WRU / RRU from true item sizes, before and after each write; the exact meter {off('wru')} / {off('rru')}"
        f"{unsized}"
    )


def _measure(aws: Any, ports: Any, meter: AwsMeter, make: Any, true: Any = None) -> tuple[str, Usage]:
    meter.reset()
    if true is not None:
        true.reset()
    with meter.origin("op"):
        run_id = make()
    wait_status(ports, run_id, meter, timeout=3600)
    meter.add_run_transitions(run_id, ports.runs.get_run(run_id))
    return run_id, meter.usage("op", run_id)


def _loop(ports: Any, events: int) -> str:
    from shared.services.workflows import register_workflow
    from tests.workflows import noop_loop

    workflow = f"bench-units-loop-{events}"
    register_workflow(ports, TENANT, noop_loop(workflow, max(1, (events - 4) // 4)))
    return workflow


FAN_OUT_INVOCATIONS_BOUND = 1.0  # per 1,000 events (decision 0151)


def _fan_out(
    label: str, used: Usage, events: int, must_read: float, subscribed: bool, waits: list[float] | None = None
) -> None:
    """The fan-out's work for one run's events against its bound: ``must_read`` read units (its tenant's interest
    once, and with a subscriber the run's creation facts once: the fork rule and tags a delivery needs) and, with a
    subscriber, one SQS FIFO request per 10 events."""
    queries = used.calls["dynamodb:Query"]
    sqs_usd = used.units["sqs_fifo"] * p.SQS_FIFO_PER_REQUEST
    measured = _ddb_usd(used.units["wru"], used.units["rru"]) + sqs_usd
    bound = (math.ceil(events / 10) * p.SQS_FIFO_PER_REQUEST if subscribed else 0.0) + _ddb_usd(0, must_read)
    line(
        f"{label}: per million events",
        f"${measured * 1e6 / events:.4f}",
        f"bound ${bound * 1e6 / events:.4f}; ratio {measured / bound:.3f}; {used.units['rru']:.1f} RRU against "
        f"{must_read:g} RRU; {used.total():,} requests "
        f"({', '.join(f'{op} {n}' for op, n in used.calls.most_common())}); {queries} subscription Queries; "
        f"{sum(used.invocations.values())} fan-out invocations",
    )
    invoked = sum(used.invocations.values())
    per_k = invoked * 1000 / max(1, events)
    held = sorted(waits or [0.0])
    line(
        f"{label}: fan-out invocations per 1,000 events",
        f"{per_k:.2f}",
        f"bound {FAN_OUT_INVOCATIONS_BOUND:.0f} ({'within' if per_k <= FAN_OUT_INVOCATIONS_BOUND else 'OVER'}); "
        f"{invoked} invocations; delivery lag added by the batching window, median / most "
        f"{held[len(held) // 2]:.2f} / {held[-1]:.2f} s",
    )


def main() -> None:
    from shared.cli.webhook_receiver import WebhookReceiver
    from shared.local import ddb_streams
    from shared.storage.schema import RUN_FACTS_SK
    from shared.wiring import get_ports

    sizes = [int(s) for s in os.environ.get("BENCH_UNITS_SIZES", "1000,10000,100000").split(",") if s.strip()]
    deployed = manifest.STREAM_BATCHING_WINDOW_S[(manifest.EVENTS, "fanout_webhooks")]
    os.environ.setdefault(ddb_streams.LOCAL_WINDOW_ENV, str(deployed))  # the deployed mapping's window
    print(
        "Capacity units per operation against their lower bounds (local moto; exact counts; DynamoDB write and "
        f"read units at ${p.DDB_PER_WRITE_REQUEST_UNIT * 1e6:.3f} / ${p.DDB_PER_READ_REQUEST_UNIT * 1e6:.3f} per "
        "million)"
    )
    aws, meter = start_stack()
    ports = get_ports()
    true = TrueUnits(aws.client("dynamodb"), meter)
    for client in metered_clients(ports):
        true.watch(client)
    loops: dict[int, str] = {}
    receiver = WebhookReceiver()  # deliveries go to it until the stack stops
    print(f"  (fan-out batching window: {ddb_streams.stream_window_s('fanout_webhooks'):g} s, deployed {deployed} s)")

    def waits_since(mark: int) -> list[float]:
        return ddb_streams.stream_window_waits("fanout_webhooks")[mark:]

    try:
        # warm caches: a create's and a fork's (a warm container's secrets, e.g. the tombstone key a fork's create
        # checks its source's erasure with, fetched once per container)
        warm, _ = _measure(aws, ports, meter, lambda: _create("conformance-noop"))
        _measure(aws, ports, meter, lambda: _fork(warm, "branch", 1))
        true.enabled = True
        for n in sizes:
            loops[n] = _loop(ports, n)
            t0 = time.monotonic()
            mark = len(waits_since(0))
            source, used = _measure(aws, ports, meter, lambda w=loops[n]: _create(w), true)
            waits = waits_since(mark)
            items = _items(aws, source)
            events = ports.runs.get_run(source).last_seq + 1
            must_read, parts = _live_reads(aws, source, loops[n])
            _row(
                f"live run, {events:,} events ({time.monotonic() - t0:.0f} s)",
                used,
                _write_bounds(items, used.invocations["advance_run"], _own_kb(aws, source)),
                must_read,
                true.of("op", source),
                requests=(len(items) + 5, "P + 5"),
                reads=parts,
            )
            line(
                f"live run, {events:,} events: write units by item",
                f"{sum(true.by_item('op', source).values()):,} WRU",
                f"{true.by_item('op', source)} (what every run writes whatever its length, beside its pages)",
            )
            floor, bare = _atomic_floor(aws, source, items)
            physical = _write_bounds(items, used.invocations["advance_run"], _own_kb(aws, source))[1]
            line(
                f"live run, {events:,} events: the least an atomic run writes",
                f"{floor:,} WRU",
                f"its pages once and plain, its create and its end one transaction each, with its tenant's cap and "
                f"start outbox (decision 0170's alternatives are its appends'): {floor / physical:.2f}x the physical "
                f"bound ({physical:,}), and the measured {used.units['wru']:,} is {used.units['wru'] / floor:.2f}x it; "
                f"with no cap or outbox {bare:,} WRU, {bare / physical:.2f}x the physical bound",
            )
            logged = ports.events.read_events(source)
            _append_alternatives(f"live run, {events:,} events", aws, source, items, logged)
            log = sum(len(json.dumps(e, separators=(",", ":"))) for e in logged)
            wire, sent = _wire(items), used.bytes_sent()
            line(
                f"live run, {events:,} events: bytes sent",
                f"{sent / 1e6:.3f} MB",
                f"{sent / log:.3f}x the log's events as JSON ({log / 1e6:.3f} MB), {sent / wire:.2f}x its "
                f"{len(items):,} stored items in DynamoDB's wire JSON ({wire / 1e6:.3f} MB); by operation "
                f"{dict(used.sent.most_common(4))}",
            )
            _fan_out(
                f"fan-out without a subscriber, {events:,} events",
                meter.usage(f"{source}|fanout_webhooks"),
                events,
                _interest_reads(aws),
                subscribed=False,
                waits=waits,
            )
            for mode, from_seq in (("branch", events // 2), ("replay", 0)):
                child, used = _measure(aws, ports, meter, lambda m=mode, f=from_seq, s=source: _fork(s, m, f), true)
                mine = _items(aws, child)
                prefix = _size([i for i in items if _first(i) < (from_seq or events)])
                copied = sum(item_kb(i) for i in mine if _first(i) < from_seq)
                appended = [i for i in mine if _first(i) >= from_seq]
                must_read, parts = _fork_reads(aws, source, child, loops[n], mode, prefix)
                copies = len([i for i in mine if _first(i) < from_seq])
                _row(
                    f"{mode} fork from {from_seq:,} of the {events:,}-event run",
                    used,
                    _write_bounds(appended, used.invocations["advance_run"], _own_kb(aws, child, source), copied),
                    must_read,
                    true.of("op", child),
                    requests=_fork_requests(len(appended), copies, prefix, mode),
                    reads=parts,
                )
        true.enabled = False
        receiver.start()
        reg = call(
            "manage_webhooks",
            api_event(
                "POST",
                "/webhooks",
                "/webhooks",
                {
                    "url": receiver.url + "/bench-units",
                    "events": ["run.started", "node.started", "node.completed", "run.completed", "run.failed"],
                },
            ),
        )
        assert reg["statusCode"] == 201, reg["body"][:300]
        # The deliveries are not the fan-out's work (bench_webhooks measures them): they are held, and the messages
        # the fan-out queued are dropped before each run (the queue holds one run's messages at a time).
        aws.pollers.pop("deliver_webhooks").stop()
        sqs, queue_url = aws.client("sqs"), os.environ[manifest.queue("webhooks").env_var]
        purged = 0.0
        for n in [
            int(s)
            for s in os.environ.get("BENCH_UNITS_SUBSCRIBED_SIZES", ",".join(map(str, sizes))).split(",")
            if s.strip()
        ]:
            time.sleep(max(0.0, purged + 60 - time.monotonic()))  # SQS takes one purge a minute
            sqs.purge_queue(QueueUrl=queue_url)
            purged = time.monotonic()
            mark = len(waits_since(0))
            source, used = _measure(aws, ports, meter, lambda w=loops.get(n) or _loop(ports, n): _create(w))
            events = ports.runs.get_run(source).last_seq + 1
            facts = [i for i in _items(aws, source, "runs", "pk") if i["sk"]["S"] == RUN_FACTS_SK]
            _fan_out(
                f"fan-out with a subscriber to every event, {events:,} events",
                meter.usage(f"{source}|fanout_webhooks"),
                events,
                _interest_reads(aws) + _ec(_size(facts)),
                subscribed=True,
                waits=waits_since(mark),
            )
    finally:
        meter.close()
        aws.stop()
        receiver.stop()


if __name__ == "__main__":
    main()
