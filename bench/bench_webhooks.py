"""Webhook delivery: AWS requests per delivered event and the delivery lag (local, moto, loopback receiver).

Runs of ``conformance-noop`` (4 events each) with one subscription for every event type. The requests counted are
those of the delivery path only: the fan-out (events-table stream → queue) and the delivery function, plus the
event-source mapping's own SQS calls (ReceiveMessage that returned a message, DeleteMessageBatch); idle long polls
are reported apart (on AWS the mapping's pollers make them whatever the traffic). Lag is receiver arrival minus
the event's own timestamp, so it includes the stream, the queue and the signing.

The load row (the issue's: 20 clients for 150 s): ``BENCH_WEBHOOK_CLIENTS`` clients (default 20) each create a
run, wait for it to end and create the next, for ``BENCH_WEBHOOK_SECONDS`` (default 150), with one subscription to
every event type; then the bench waits (at most 300 s) for every delivery. First delivery is, per run, the
receiver's first hit for that run minus the moment its ``POST /runs`` returned, split into stages by when that
event was stored (its timestamp), fanned out (its SendMessageBatch answered), received by the local mapping (its
ReceiveMessage answered) and arrived; "queued at the end" is the webhook queue's depth when the clients stop; CPU
is this process's (moto, the handlers and the clients are all in it) over the load's wall time, beside the
machine's load average. ``BENCH_WEBHOOK_BASELINE_SECONDS`` (default 0: skipped) first runs the same clients that
long with no subscription, for the figures without delivery. Everything is loopback, every loop bounded.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from collections import Counter
from datetime import datetime
from typing import Any

from bench.common import api_event, call, line, start_stack, wait_status
from shared.local.ddb_streams import STREAM_LANES, stream_delivery_errors

RUNS = 20
QUIET_RUNS = 5
LOAD_CLIENTS = int(os.environ.get("BENCH_WEBHOOK_CLIENTS", "20"))
LOAD_SECONDS = float(os.environ.get("BENCH_WEBHOOK_SECONDS", "150"))
BASELINE_SECONDS = float(os.environ.get("BENCH_WEBHOOK_BASELINE_SECONDS", "0"))
DRAIN_S = 300
PATH_THREADS = ("openwop-ddb-stream", "openwop-sqs-")


class _PathCounter:
    """Counts AWS calls made on the delivery path's threads (after the call, so an empty receive is told apart)."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.idle_receives = 0
        self._lock = threading.Lock()

    def __call__(self, model: Any = None, parsed: Any = None, **_: Any) -> None:
        if not threading.current_thread().name.startswith(PATH_THREADS):
            return
        name = getattr(model, "name", "?")
        service = getattr(getattr(model, "service_model", None), "service_name", "?")
        with self._lock:
            if name == "ReceiveMessage" and not (parsed or {}).get("Messages"):
                self.idle_receives += 1
            else:
                self.calls[f"{service}:{name}"] += 1


def _ms(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000


def main() -> None:
    from shared.cli.webhook_receiver import WebhookReceiver
    from shared.wiring import get_ports

    aws, _ = start_stack()
    receiver = WebhookReceiver()
    receiver.start()
    try:
        ports = get_ports()
        counter = _PathCounter()
        clients = {
            id(c): c
            for c in (
                ports.runs._c,
                ports.host._c,
                ports.events._c,  # type: ignore[attr-defined]
                ports.queues["webhooks"]._c,
                aws.client("sqs"),
            )
        }  # type: ignore[attr-defined]
        for c in clients.values():
            c.meta.events.register("after-call.*.*", counter)
        if BASELINE_SECONDS > 0:  # the same clients before any subscription exists: nothing is delivered
            _load(aws, ports, receiver, None, BASELINE_SECONDS)
            counter.calls.clear()  # the requests per delivered event below count from here
            counter.idle_receives = 0
        events = ["run.started", "node.started", "node.completed", "run.completed", "run.failed"]
        reg = call(
            "manage_webhooks",
            api_event("POST", "/webhooks", "/webhooks", {"url": receiver.url + "/bench", "events": events}),
        )
        assert reg["statusCode"] == 201, reg
        webhook_id = json.loads(reg["body"])["webhookId"]
        t0 = time.monotonic()
        run_ids = []
        for _ in range(RUNS):
            out = call("create_run", api_event("POST", "/runs", "/runs", {"workflowId": "conformance-noop"}))
            run_ids.append(json.loads(out["body"])["runId"])
        for run_id in run_ids:
            wait_status(ports, run_id)
        expected = sum(len(ports.events.read_events(r)) for r in run_ids)
        deadline = time.monotonic() + 120
        while len(receiver.deliveries(webhook_id)) < expected and time.monotonic() < deadline:
            time.sleep(0.05)
        wall = time.monotonic() - t0
        time.sleep(1.0)  # late duplicates would show here
        hits = receiver.deliveries(webhook_id)
        keys = [(h.json()["runId"], h.json()["event"]["sequence"]) for h in hits]
        lags = sorted(h.at * 1000 - _ms(h.json()["event"]["timestamp"]) for h in hits)
        in_order = all(
            [s for r, s in keys if r == run_id] == sorted(s for r, s in keys if r == run_id) for run_id in run_ids
        )
        delivered = len(set(keys))
        total = sum(counter.calls.values())
        line("events stored / delivered / duplicates", f"{expected} / {delivered} / {len(keys) - delivered}")
        line("delivered in log order per run", in_order)
        line("AWS requests per delivered event (delivery path)", f"{total / max(1, delivered):.2f}")
        for op, n in sorted(counter.calls.items()):
            line(f"  {op}", f"{n / max(1, delivered):.2f}", "per event")
        line("empty ReceiveMessage polls (whole bench, not counted above)", counter.idle_receives)
        poller = aws.pollers.get("deliver_webhooks")
        line(
            "delivery Lambda invocations per delivered event",
            f"{(poller.invocations if poller else 0) / max(1, delivered):.2f}",
        )
        line(
            f"delivery lag p50 / p95, {RUNS} runs at once (event timestamp -> receiver)",
            f"{statistics.median(lags):.0f} / {lags[int(0.95 * (len(lags) - 1))]:.0f}",
            "ms",
        )
        line(f"wall time for {RUNS} runs started at once and their deliveries", f"{wall:.1f}", "s")
        # one run at a time: the lag of a quiet host
        quiet: list[float] = []
        for _ in range(QUIET_RUNS):
            out = call("create_run", api_event("POST", "/runs", "/runs", {"workflowId": "conformance-noop"}))
            run_id = json.loads(out["body"])["runId"]
            wait_status(ports, run_id)
            n = len(ports.events.read_events(run_id))
            deadline = time.monotonic() + 30
            while len(receiver.deliveries(webhook_id, run_id)) < n and time.monotonic() < deadline:
                time.sleep(0.01)
            quiet += [
                h.at * 1000 - _ms(h.json()["event"]["timestamp"]) for h in receiver.deliveries(webhook_id, run_id)
            ]
        quiet.sort()
        line(
            f"delivery lag p50 / p95, one run at a time ({QUIET_RUNS} runs)",
            f"{statistics.median(quiet):.0f} / {quiet[int(0.95 * (len(quiet) - 1))]:.0f}",
            "ms",
        )
        _load(aws, ports, receiver, webhook_id, LOAD_SECONDS)
    finally:
        receiver.stop()
        aws.stop()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))] if ordered else float("nan")


def _first_stored(ports: Any, run_id: str) -> float | None:
    """When the run's first event was stored (its timestamp, epoch seconds)."""
    found = ports.events.read_events(run_id, limit=1)
    return _ms(found[0]["timestamp"]) / 1000 if found else None


class _Stages:
    """When each (run, sequence) was fanned out (its SendMessageBatch answered) and received by the local mapping
    (its ReceiveMessage answered), from botocore's events on the two clients (no patching)."""

    def __init__(self, queue_client: Any, poller_client: Any) -> None:
        self.sent: dict[tuple[str, int], float] = {}
        self.received: dict[tuple[str, int], float] = {}
        self._lock = threading.Lock()
        queue_client.meta.events.register("before-parameter-build.sqs.SendMessageBatch", self._sending)
        queue_client.meta.events.register("after-call.sqs.SendMessageBatch", self._sent)
        poller_client.meta.events.register("after-call.sqs.ReceiveMessage", self._received)

    @staticmethod
    def _key(body: str) -> tuple[str, int]:
        doc = json.loads(body)
        return str(doc["runId"]), int(doc["sequence"])

    def _sending(self, params: Any = None, context: Any = None, **_: Any) -> None:
        if context is not None:
            context["bench_keys"] = [self._key(e["MessageBody"]) for e in (params or {}).get("Entries", [])]

    def _stamp(self, into: dict[tuple[str, int], float], keys: list[tuple[str, int]]) -> None:
        now = time.time()
        with self._lock:
            for key in keys:
                into.setdefault(key, now)

    def _sent(self, context: Any = None, **_: Any) -> None:
        self._stamp(self.sent, list((context or {}).get("bench_keys", [])))

    def _received(self, parsed: Any = None, **_: Any) -> None:
        self._stamp(self.received, [self._key(m["Body"]) for m in (parsed or {}).get("Messages", [])])


def _load(aws: Any, ports: Any, receiver: Any, webhook_id: str | None, seconds: float) -> None:
    """Clients creating runs back to back for a bounded time; first delivery per run (and its stages), the drain,
    and the CPU the process spent. ``webhook_id`` None: no subscription (the baseline without delivery)."""
    created: list[tuple[str, float]] = []
    ended: list[float] = []
    lock = threading.Lock()
    stages = _Stages(ports.queues["webhooks"]._c, aws.pollers["deliver_webhooks"]._client) if webhook_id else None
    stop_at = time.monotonic() + seconds

    def client() -> None:
        while time.monotonic() < stop_at:
            out = call("create_run", api_event("POST", "/runs", "/runs", {"workflowId": "conformance-noop"}))
            if out["statusCode"] != 201:
                time.sleep(0.2)  # throttled: the tenant's write bucket; try again
                continue
            run_id = json.loads(out["body"])["runId"]
            posted = time.time()
            with lock:
                created.append((run_id, posted))
            wait_status(ports, run_id, timeout=120)
            with lock:
                ended.append(time.time() - posted)

    threads = [threading.Thread(target=client, name=f"bench-client-{i}", daemon=True) for i in range(LOAD_CLIENTS)]
    t0, cpu0, load0 = time.monotonic(), time.process_time(), os.getloadavg()[0]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 180)
    busy = (time.process_time() - cpu0) / max(time.monotonic() - t0, 0.001)
    load1 = os.getloadavg()[0]
    sqs = aws.client("sqs")
    depth = sqs.get_queue_attributes(
        QueueUrl=os.environ["WEBHOOKS_QUEUE_URL"], AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    queued = int(depth.get("ApproximateNumberOfMessages", 0))
    label = "load" if webhook_id else "no subscription"
    line(f"{label}: {LOAD_CLIENTS} clients creating runs for {seconds:.0f} s", f"{len(created)} runs")
    line(
        f"{label}: process CPU busy while the clients ran (machine load average at start / end)",
        f"{100 * busy:.0f}% of one core ({load0:.1f} / {load1:.1f})",
    )
    first_event = [ts - at for r, at in created[:200] if (ts := _first_stored(ports, r)) is not None]
    line(
        f"{label}: POST -> first event stored, p50 / p95 (first 200 runs)",
        f"{_pct(first_event, 0.5):.1f} / {_pct(first_event, 0.95):.1f}",
        "s",
    )
    line(f"{label}: POST -> run ended (as its client saw it), p50", f"{_pct(ended, 0.5):.1f}", "s")
    if webhook_id is None or stages is None:
        return
    _drain_and_report(aws, ports, receiver, webhook_id, stages, created, t0, queued)


def _drain_and_report(
    aws: Any,
    ports: Any,
    receiver: Any,
    webhook_id: str,
    stages: Any,
    created: list[tuple[str, float]],
    t0: float,
    queued: int,
) -> None:
    """Wait (bounded) for every event of the runs ``created`` to be delivered, then print each stage's latency."""
    expected = sum(len(ports.events.read_events(r)) for r, _ in created)
    run_ids = {r for r, _ in created}
    deadline = time.monotonic() + DRAIN_S

    def arrived() -> list[Any]:
        return [h for h in receiver.deliveries(webhook_id) if h.json()["runId"] in run_ids]

    def delivered() -> int:  # each delivery once: a retried one may arrive twice
        return len({(h.json()["runId"], h.json()["event"]["sequence"]) for h in arrived()})

    while delivered() < expected and time.monotonic() < deadline:
        time.sleep(0.2)
    drained = time.monotonic() - t0
    hits = arrived()
    first: dict[str, tuple[float, float, int]] = {}  # run -> (arrival, event timestamp, sequence) of its first
    for h in hits:
        doc = h.json()
        if doc["runId"] not in first or h.at < first[doc["runId"]][0]:
            first[doc["runId"]] = (h.at, _ms(doc["event"]["timestamp"]) / 1000, int(doc["event"]["sequence"]))
    latencies = [first[r][0] - at for r, at in created if r in first]
    stored = [first[r][1] - at for r, at in created if r in first]
    pipeline = [arrival - ts for arrival, ts, _ in first.values()]
    fanned = [stages.sent[(r, q)] - ts for r, (_, ts, q) in first.items() if (r, q) in stages.sent]
    waited = [
        stages.received[(r, q)] - stages.sent[(r, q)]
        for r, (_, _, q) in first.items()
        if (r, q) in stages.sent and (r, q) in stages.received
    ]
    posted = [arrival - stages.received[(r, q)] for r, (arrival, _, q) in first.items() if (r, q) in stages.received]
    keys = {(h.json()["runId"], h.json()["event"]["sequence"]) for h in hits}
    poller = aws.pollers.get("deliver_webhooks")
    workers = getattr(poller, "workers", "?")
    line("load: deliveries arrived / expected", f"{len(keys)} / {expected}")
    line(
        "load: first delivery after its run's POST, p50 / p95",
        f"{_pct(latencies, 0.5):.1f} / {_pct(latencies, 0.95):.1f}",
        "s",
    )
    line("load:   of which: POST -> first event stored, p50", f"{_pct(stored, 0.5):.1f}", "s")
    line(
        "load:   of which: event stored -> delivered (stream, queue, POST), p50 / p95",
        f"{_pct(pipeline, 0.5):.1f} / {_pct(pipeline, 0.95):.1f}",
        "s",
    )
    line(
        "load:     stored -> fanned out (stream, fan-out's reads, SendMessageBatch), p50 / p95",
        f"{_pct(fanned, 0.5):.1f} / {_pct(fanned, 0.95):.1f}",
        "s",
    )
    line(
        "load:     fanned out -> received by the mapping, p50 / p95",
        f"{_pct(waited, 0.5):.1f} / {_pct(waited, 0.95):.1f}",
        "s",
    )
    line(
        "load:     received -> arrived (invocation, its reads, signing, POST), p50 / p95",
        f"{_pct(posted, 0.5):.1f} / {_pct(posted, 0.95):.1f}",
        "s",
    )
    line("load: queued when the clients stopped", queued)
    line("load: delivery rate (all delivered / time from start)", f"{len(keys) / max(drained, 0.001):.1f}", "/s")
    line("load: local delivery workers / stream lanes per consumer", f"{workers} / {STREAM_LANES}")
    dead = len(ports.host.query("WEBHOOKDL#" + webhook_id))
    line(
        "load: dead-lettered / stream batches dropped / delivery invocations that raised",
        f"{dead} / {len(stream_delivery_errors())} / {len(getattr(poller, 'errors', []))}",
    )


if __name__ == "__main__":
    main()
