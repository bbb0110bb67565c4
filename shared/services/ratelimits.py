"""Per-tenant rate limit on every write (POST, PUT, PATCH, DELETE of an authenticated route).

One token bucket per tenant (``Settings.tenant_write_rate`` per second, ``tenant_write_burst`` at once; CDK context
``tenantWriteRate`` / ``tenantWriteBurst``, on by default; a rate of 0 turns it off), shared by every function of
the deployment (``Ports.rate_limits``, a conditional write in the host table). Past it the request is refused with
the protocol's ``429 rate_limited`` and ``Retry-After`` (the whole seconds until a token is back) before it touches
anything else, so one tenant's flood costs the others nothing but the refusals' Lambda time. Reads are not
limited per tenant (the API stage's throttle bounds them all together).
"""

from __future__ import annotations

import math

from shared.errors import RateLimitedError
from shared.ports import Ports, RateLimit

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def bucket_key(tenant: str) -> str:
    return f"{tenant}#write"


def check_write(ports: Ports, tenant: str) -> None:
    """Take one token of ``tenant``'s write bucket; ``RateLimitedError`` (429, Retry-After) when it is empty."""
    settings = ports.settings
    if settings.tenant_write_rate <= 0:
        return
    limit = RateLimit(per_second=float(settings.tenant_write_rate), burst=max(1, int(settings.tenant_write_burst)))
    decision = ports.rate_limits.take(bucket_key(tenant), limit, ports.clock.now_ms())
    if not decision.allowed:
        raise RateLimitedError(
            "This tenant sent too many write requests; retry later.",
            retry_after_s=max(1, math.ceil(decision.retry_after_ms / 1000)),
        )
