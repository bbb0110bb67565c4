"""The Queue port on SQS (FIFO): batched sends, and a failed message's next attempt pushed back.

``send_batch`` uses SendMessageBatch (one request per ten messages) and retries the entries SQS reports as failed
(throttling) a few times before raising. ``retry_later`` sets the visibility timeout of received messages
(ChangeMessageVisibilityBatch, one request per ten): that is the backoff before the next attempt; SQS counts the
attempts (``ApproximateReceiveCount``) and its redrive policy moves a message to the dead-letter queue after the
last one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from shared.errors import StorageError
from shared.ports import QueueMessage

MAX_BATCH = 10
SEND_LANES = 4


def _lanes(messages: Sequence[QueueMessage], most: int) -> list[list[QueueMessage]]:
    """``messages`` split into at most ``most`` lists of whole message groups, each group's messages in their
    order, the lists about equally long; one list when they fit one request."""
    if len(messages) <= MAX_BATCH:
        return [list(messages)] if messages else []
    groups: dict[str, list[QueueMessage]] = {}
    for m in messages:
        groups.setdefault(m.group, []).append(m)
    lanes: list[list[QueueMessage]] = [[] for _ in range(min(most, len(groups)))]
    for group in sorted(groups.values(), key=len, reverse=True):
        min(lanes, key=len).extend(group)
    return [lane for lane in lanes if lane]


MAX_VISIBILITY_S = 12 * 3600


class SqsQueue:
    def __init__(self, client: Callable[[], Any], queue_url: str) -> None:
        self._client_factory = client
        self._client: Any = None
        self.url = queue_url

    @property
    def _c(self) -> Any:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    def send_batch(self, messages: Sequence[QueueMessage]) -> int:
        """Send ``messages``, 10 per SendMessageBatch. Each message group's messages go in order, through one
        sender; up to ``SEND_LANES`` senders run at once (by whole groups), so a fan-out of many runs is not one
        request after another."""
        lanes = _lanes(messages, SEND_LANES)
        if len(lanes) <= 1:
            return sum(self._send_in_order(lane) for lane in lanes)
        import threading
        from concurrent.futures import ThreadPoolExecutor

        self._c  # noqa: B018 - the client is built once, before the senders share it
        with ThreadPoolExecutor(
            max_workers=len(lanes), thread_name_prefix=threading.current_thread().name + "-send"
        ) as pool:
            return sum(pool.map(self._send_in_order, lanes))

    def _send_in_order(self, messages: Sequence[QueueMessage]) -> int:
        sent = 0
        for start in range(0, len(messages), MAX_BATCH):
            chunk = {str(i): m for i, m in enumerate(messages[start : start + MAX_BATCH])}
            for attempt in range(4):
                entries = [
                    {"Id": i, "MessageBody": m.body, "MessageGroupId": m.group, "MessageDeduplicationId": m.dedup_id}
                    for i, m in chunk.items()
                ]
                answer = self._c.send_message_batch(QueueUrl=self.url, Entries=entries)
                sent += len(answer.get("Successful", []))
                failed = answer.get("Failed", [])
                if not failed:
                    break
                if any(f.get("SenderFault") for f in failed) or attempt == 3:
                    raise StorageError(f"{len(failed)} queue messages were not accepted")
                chunk = {f["Id"]: chunk[f["Id"]] for f in failed}
                time.sleep(0.1 * (2**attempt))
        return sent

    def retry_later(self, receipts: Sequence[tuple[str, int]]) -> None:
        for start in range(0, len(receipts), MAX_BATCH):
            entries = [
                {"Id": str(i), "ReceiptHandle": handle, "VisibilityTimeout": max(0, min(int(delay), MAX_VISIBILITY_S))}
                for i, (handle, delay) in enumerate(receipts[start : start + MAX_BATCH])
            ]
            self._c.change_message_visibility_batch(QueueUrl=self.url, Entries=entries)
