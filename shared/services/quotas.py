"""Per-tenant quota on run starts: at most ``Settings.run_starts_per_minute`` per tenant and clock minute (0: off).

One atomic counter per (tenant, minute) (``Ports.quotas``, in the host table), expiring two
minutes later. A fixed window: a tenant may burst up to twice the quota across a minute boundary. Refused starts
count too (a tenant that keeps retrying stays refused until the minute turns). Idempotent replays never reach it.
"""

from __future__ import annotations

from shared.errors import RateLimitedError
from shared.ports import Ports

WINDOW_MS = 60_000


def check_run_start(ports: Ports, tenant: str) -> None:
    """Count one run start for ``tenant``; ``RateLimitedError`` (429, Retry-After: the rest of the minute) past
    the quota."""
    quota = ports.settings.run_starts_per_minute
    if quota <= 0:
        return
    now = ports.clock.now_ms()
    window = now // WINDOW_MS
    n = ports.quotas.add_run_start(tenant, window, expires_at=(window + 2) * WINDOW_MS // 1000)
    if n > quota:
        retry = -(-((window + 1) * WINDOW_MS - now) // 1000)
        raise RateLimitedError("This tenant started too many runs this minute; retry later.", retry_after_s=retry)
