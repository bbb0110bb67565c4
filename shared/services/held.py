"""Fair compute for held requests: each tenant holds at most ``tenant_max_held_requests`` long polls, and as many
SSE streams, at once (decision 0160); past it the protocol's ``429 rate_limited`` with ``Retry-After``.

A held request is counted only once it is about to wait (a poll or stream answered from what is stored costs
nothing), in the counter of the minute it began (``ports.slots.hold``), and always given back when it ends
(``finally``). A function killed while holding (a timeout) cannot give it back: its count lasts until its minute
ends, when a new counter begins, so a leak is bounded by a minute, and requests that began in the minute before are
not counted against the current one (a tenant may briefly hold up to twice the limit across a minute's turn).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from shared.errors import RateLimitedError
from shared.ports import Ports

POLL = "poll"
STREAM = "stream"
WINDOW_S = 60  # longer than any request is held (a long poll waits at most 60 s, an SSE body 10 s)
RETRY_MAX_S = 5
KEEP_S = 86_400  # a window's counter expires a day after it ended


@contextmanager
def held(ports: Ports, tenant: str, kind: str) -> Iterator[None]:
    """Hold one of the tenant's ``kind`` requests for the block; ``RateLimitedError`` when it holds its limit."""
    limit = int(ports.settings.tenant_max_held_requests)
    if limit <= 0:
        yield
        return
    now_s = ports.clock.now_ms() // 1000
    window = now_s // WINDOW_S
    ends_s = (window + 1) * WINDOW_S
    if not ports.slots.hold(tenant, kind, window, limit, expires_at=ends_s + KEEP_S):
        raise RateLimitedError(
            "Too many requests of this tenant are waiting; retry later.",
            retry_after_s=max(1, min(RETRY_MAX_S, ends_s - now_s)),
        )
    try:
        yield
    finally:
        try:
            ports.slots.unhold(tenant, kind, window)
        except Exception:  # noqa: BLE001, S110 - the window's end forgets it (see the module's note)
            pass


class Holding:
    """A request that may wait: ``before_wait`` holds one of its tenant's ``kind`` requests, once, and leaving the
    block gives it back (a request answered without waiting holds nothing)."""

    def __init__(self, ports: Ports, tenant: str, kind: str) -> None:
        self._ports, self._tenant, self._kind = ports, tenant, kind
        self._stack = ExitStack()
        self._held = False

    def __enter__(self) -> Holding:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stack.close()

    def before_wait(self) -> None:
        if not self._held:
            self._stack.enter_context(held(self._ports, self._tenant, self._kind))
            self._held = True
