"""The SQS → Lambda event-source mapping for the embedded AWS: moto stores queues but invokes nothing.

One ``QueuePoller`` per manifest function that ``consumes`` a queue: a few daemon threads long-poll the queue
(``ReceiveMessage``, batch size 1 as the CDK mapping; when the queue is empty, a pause until a message arrives), hand each message to the real handler as an
AWS-shaped SQS event in this process, and delete what the handler did not report in ``batchItemFailures``; an
invocation that raises leaves its message to come back after its visibility timeout, as on AWS. Bounded: the
threads stop with the stack (``stop()``), and no receive waits.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from typing import Any

from shared import manifest
from shared.local.lambda_registry import invoke_target, resolve_target

log = logging.getLogger(__name__)
BATCH_SIZE = 1  # as the deployed mapping: exact attempt counts per message, FIFO order per group
# moto's long poll spins on a queue whose visible messages belong to a group in flight; the local mapping polls
# without waiting and, when the queue is empty, sleeps until a message is sent (moto's ``Queue.add_message`` is
# wrapped to signal it; this process runs moto) or at most a second (a retry becoming visible again).
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
        _hooked = True


class QueuePoller:
    def __init__(self, client: Any, fn: manifest.Function, queue_url: str, queue_arn: str, region: str,
                 *, threads: int = 2) -> None:
        self._client = client
        self._fn = fn
        self._url = queue_url
        self._arn = queue_arn
        self._region = region
        self._stop = threading.Event()
        # moto's ReceiveMessage is not atomic: two concurrent receives can each take a message of one FIFO group
        # (SQS never hands out a group's next message while one is in flight). Receives are serialized here;
        # the invocations still run concurrently.
        self._receive_lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, name=f"openwop-sqs-{fn.name}-{i}", daemon=True)
                         for i in range(threads)]
        self.invocations = 0
        self.errors: list[dict[str, Any]] = []

    def start(self) -> None:
        _hook_arrivals()
        for t in self._threads:
            t.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        _arrived.set()
        for t in self._threads:
            t.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if not self.poll_once():
                    _arrived.wait(IDLE_MAX_S)
                    _arrived.clear()
            except Exception as exc:  # noqa: BLE001 - the server is stopping, or one receive failed: keep polling
                if self._stop.is_set():
                    return
                log.debug("sqs poll of %s failed: %s", self._fn.name, exc)
                self._stop.wait(0.5)

    def poll_once(self) -> int:
        with self._receive_lock:
            answer = self._client.receive_message(QueueUrl=self._url, MaxNumberOfMessages=BATCH_SIZE,
                                                  WaitTimeSeconds=WAIT_S, AttributeNames=["All"],
                                                  MessageAttributeNames=["All"])
        messages = answer.get("Messages", [])
        if not messages:
            return 0
        event = {"Records": [self._record(m) for m in messages]}
        self.invocations += 1
        result, error = invoke_target(resolve_target(self._fn.local_name), event)
        if error is not None:
            self.errors.append(error)
            return len(messages)  # nothing deleted: every message comes back after its visibility timeout
        failed = {f.get("itemIdentifier") for f in (result or {}).get("batchItemFailures", [])}
        done = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                for i, m in enumerate(messages) if m["MessageId"] not in failed]
        if done:
            self._client.delete_message_batch(QueueUrl=self._url, Entries=done)
        return len(messages)

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
