"""Message queues and rate limits (token buckets)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class QueueMessage:
    """One message for a FIFO queue: ``group`` orders it (messages of one group are handed out one at a time, in
    send order); ``dedup_id`` makes a re-send within the queue's deduplication window a no-op."""

    body: str
    group: str
    dedup_id: str


class Queue(Protocol):
    """A message queue with a dead-letter queue behind it (SQS FIFO). Consumers are invoked by the platform
    (an event source mapping); they only ever push a message's next attempt back."""

    def send_batch(self, messages: Sequence[QueueMessage]) -> int: ...
    def retry_later(self, receipts: Sequence[tuple[str, int]]) -> None: ...


@dataclass(frozen=True)
class RateLimit:
    """A token bucket: ``burst`` tokens at most, refilled at ``per_second``; each request takes one."""

    per_second: float
    burst: int


@dataclass(frozen=True)
class RateDecision:
    """A bucket's answer: ``allowed``, or refused until ``retry_after_ms`` from now (when a token is back)."""

    allowed: bool
    retry_after_ms: int = 0


class RateLimiter(Protocol):
    """Token buckets by key (a tenant and a route class), shared by every instance of every function: each
    ``take`` is one conditional write of the bucket's item, and refused takes change nothing."""

    def take(self, key: str, limit: RateLimit, now_ms: int) -> RateDecision: ...
