"""The SQS → Lambda event-source mapping for the embedded AWS: moto stores queues but invokes nothing.

One ``QueuePoller`` per manifest function that ``consumes`` a queue. Like Lambda's FIFO mapping, it delivers
different message groups (a webhook queue's group is one (subscription, run)) concurrently and each group's messages
one at a time, in order:

- one receiver thread takes up to ``RECEIVE_MAX`` messages per ``ReceiveMessage`` (moto's receive is not atomic:
  two concurrent receives could each take a message of one group, so there is only one receiver) whenever a worker
  is free; when the queue is empty it sleeps until a message is sent (moto's ``Queue.add_message`` is wrapped to
  signal it; this process runs moto) or at most a second (a retry becoming visible again);
- the messages of one receive are split by ``MessageGroupId`` into lanes, and ``workers`` threads (bounded) run the
  lanes: each message of a lane is one invocation of the real handler with a one-record SQS event (batch size 1, as
  the deployed mapping), in order; what succeeded is deleted (one ``DeleteMessageBatch`` per lane);
- moto's queue scans read the clock once per scan instead of once per message (``_one_clock_read_per_scan``);
- when a message fails (reported in ``batchItemFailures``: its handler already set its backoff) or the invocation
  raises, the lane stops: the messages behind it in its group are not attempted, made visible again (they stay
  behind the failed one, whose group SQS holds while it is in flight) and their receive is uncounted, so every
  message's ``ApproximateReceiveCount`` is its number of attempts, as with one message per receive.

Bounded: the threads stop with the stack (``stop()``), no receive waits, at most ``workers`` lanes run at once.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from shared import manifest
from shared.local.lambda_registry import invoke_target, resolve_target

log = logging.getLogger(__name__)
RECEIVE_MAX = 10  # SQS's most per ReceiveMessage
WORKERS = 32  # lanes (message groups) delivered at once; each invocation is one message, as the deployed mapping
WAIT_S = 0
IDLE_MAX_S = 1.0
_arrived = threading.Event()
_hooked = False
_hook_lock = threading.Lock()


def _hook_arrivals() -> None:
    global _hooked
    with _hook_lock:
        if _hooked:
            return
        from moto.sqs.models import Queue

        original = Queue.add_message

        def add_message(self: Any, message: Any) -> None:
            original(self, message)
            _arrived.set()

        Queue.add_message = add_message  # type: ignore[method-assign]
        _one_clock_read_per_scan(Queue)
        _hooked = True


def _one_clock_read_per_scan(queue_class: Any) -> None:
    """moto's queue scans (the visible messages a receive walks, and the three approximate counts, which every
    SendMessage computes up to four times through ``Queue.attributes``) read the clock once per message; under
    load that made one SendMessageBatch to a queue of a few hundred messages take a second or more. The same
    predicates (``Message.visible`` / ``delayed``), the clock read once per scan."""
    from moto.core.utils import unix_time_millis

    def visible(self: Any) -> list[Any]:
        now = unix_time_millis()
        return [m for m in self._messages if now > m.visible_at and not now < m.delayed_until]

    def count(test: Any) -> Any:
        def counted(self: Any) -> int:
            now = unix_time_millis()
            return sum(1 for m in list(self._messages) if test(m, now))

        return property(counted)

    queue_class.messages = property(visible)
    queue_class.approximate_number_of_messages = count(lambda m, now: now > m.visible_at and not now < m.delayed_until)
    queue_class.approximate_number_of_messages_not_visible = count(lambda m, now: not now > m.visible_at)
    queue_class.approximate_number_of_messages_delayed = count(lambda m, now: now < m.delayed_until)


def _uncount(queue_url: str, message_ids: Sequence[str]) -> None:
    """Undo the receive of messages handed over but never attempted (moto's state, in this process)."""
    from moto.sqs.models import sqs_backends

    from shared.local.context import DEFAULT_ACCOUNT, DEFAULT_REGION

    queue = sqs_backends[DEFAULT_ACCOUNT][DEFAULT_REGION].queues.get(queue_url.rstrip("/").rsplit("/", 1)[-1])
    if queue is None:
        return
    wanted = set(message_ids)
    with queue._messages_lock:
        for m in queue._messages:
            if m.id in wanted and m.approximate_receive_count > 0:
                m.approximate_receive_count -= 1


class QueuePoller:
    def __init__(
        self, client: Any, fn: manifest.Function, queue_url: str, queue_arn: str, region: str, *, workers: int = WORKERS
    ) -> None:
        self._client = client
        self._fn = fn
        self._url = queue_url
        self._arn = queue_arn
        self._region = region
        self._stop = threading.Event()
        self.workers = workers
        self._free = threading.Semaphore(workers)  # one permit per lane running or waiting for a worker
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"openwop-sqs-{fn.name}")
        self._thread = threading.Thread(target=self._run, name=f"openwop-sqs-{fn.name}-receive", daemon=True)
        self._lock = threading.Lock()
        self.invocations = 0
        self.errors: list[dict[str, Any]] = []

    def start(self) -> None:
        _hook_arrivals()
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        _arrived.set()
        self._thread.join(timeout)
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self._free.acquire(timeout=0.2):  # every worker busy: receive nothing more yet
                continue
            try:
                received = self.poll_once(holding=True)
            except Exception as exc:  # noqa: BLE001 - the server is stopping, or one receive failed: keep polling
                self._free.release()
                if self._stop.is_set():
                    return
                log.debug("sqs poll of %s failed: %s", self._fn.name, exc)
                self._stop.wait(0.5)
                continue
            if not received:
                _arrived.wait(IDLE_MAX_S)
                _arrived.clear()

    def poll_once(self, *, holding: bool = False) -> int:
        """One receive, its lanes handed to the workers; returns the number of messages received. ``holding``: the
        caller holds one lane permit (released here when nothing was received)."""
        answer = self._client.receive_message(
            QueueUrl=self._url,
            MaxNumberOfMessages=RECEIVE_MAX,
            WaitTimeSeconds=WAIT_S,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        messages = answer.get("Messages", [])
        lanes: dict[str, list[dict[str, Any]]] = {}
        for m in messages:  # SQS hands a group's messages over in order
            lanes.setdefault(str(m.get("Attributes", {}).get("MessageGroupId", m["MessageId"])), []).append(m)
        if not holding:
            self._free.acquire()
        if not lanes:
            self._free.release()
            return 0
        for i, lane in enumerate(lanes.values()):
            if i:
                self._free.acquire()  # bounded: a lane past the workers waits here, its messages in flight
            self._pool.submit(self._lane, lane)
        return len(messages)

    def _lane(self, messages: list[dict[str, Any]]) -> None:
        done: list[dict[str, Any]] = []
        try:
            for i, m in enumerate(messages):
                if self._stop.is_set():  # the stack is stopping: what was not attempted goes back uncounted
                    self._return(messages[i:])
                    break
                if not self._invoke(m):
                    self._return(messages[i + 1 :])
                    break
                done.append(m)
        except Exception as exc:  # noqa: BLE001 - one lane's failure must not end the worker
            log.debug("sqs lane of %s failed: %s", self._fn.name, exc)
        finally:
            try:
                if done:
                    self._client.delete_message_batch(
                        QueueUrl=self._url,
                        Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)],
                    )
            finally:
                self._free.release()

    def _invoke(self, m: dict[str, Any]) -> bool:
        """One invocation with one record; True when the message may be deleted."""
        with self._lock:
            self.invocations += 1
        result, error = invoke_target(resolve_target(self._fn.local_name), {"Records": [self._record(m)]})
        if error is not None:
            self.errors.append(error)
            return False  # not deleted: it comes back after its visibility timeout
        failed = {f.get("itemIdentifier") for f in (result or {}).get("batchItemFailures", [])}
        return m["MessageId"] not in failed

    def _return(self, messages: list[dict[str, Any]]) -> None:
        """Messages behind a failure in their group: visible again (still held behind it) and not counted."""
        if not messages:
            return
        self._client.change_message_visibility_batch(
            QueueUrl=self._url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                for i, m in enumerate(messages)
            ],
        )
        _uncount(self._url, [m["MessageId"] for m in messages])

    def _record(self, m: dict[str, Any]) -> dict[str, Any]:
        return {
            "messageId": m["MessageId"],
            "receiptHandle": m["ReceiptHandle"],
            "body": m["Body"],
            "attributes": dict(m.get("Attributes", {})),
            "messageAttributes": m.get("MessageAttributes", {}),
            "md5OfBody": m.get("MD5OfBody") or hashlib.md5(m["Body"].encode()).hexdigest(),  # noqa: S324
            "eventSource": "aws:sqs",
            "eventSourceARN": self._arn,
            "awsRegion": self._region,
        }
