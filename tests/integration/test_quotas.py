"""Per-tenant quota on run starts (RUN_STARTS_PER_MINUTE): counted per tenant and clock minute in the host table,
429 ``rate_limited`` with Retry-After past it, other tenants untouched. The clock is injected; nothing sleeps."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from tests.helpers import unique
from tests.wire import raw


class FixedClock:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def now_ms(self) -> int:
        return self.ms

    def iso(self, ms: int | None = None) -> str:
        from shared.clock import iso_from_ms

        return iso_from_ms(self.ms if ms is None else ms)

    def sleep(self, seconds: float) -> None:
        self.ms += int(seconds * 1000)


@pytest.fixture()
def quota_ports(host) -> Iterator[tuple[object, FixedClock]]:
    """The host's ports with a quota of 2 run starts per minute and a clock the test moves."""
    from shared.services import auth
    from shared.wiring import get_ports, set_ports

    base = get_ports()
    clock = FixedClock((1_900_000_000_000 // 60_000) * 60_000 + 10_000)  # 10 s into a minute
    ports = dataclasses.replace(base, clock=clock, settings=dataclasses.replace(base.settings, run_starts_per_minute=2))
    set_ports(ports)
    auth.reset_cache()
    try:
        yield ports, clock
    finally:
        set_ports(None)
        auth.reset_cache()


def _start(host, key: str):
    return raw(host.base_url, "POST", "/runs", {"workflowId": "conformance-noop"}, key=key)


def test_run_starts_past_the_tenant_quota_are_429_until_the_minute_turns(host, quota_ports):
    from shared.services import auth

    ports, clock = quota_ports
    # Given a fresh tenant with a key, and a quota of 2 starts per minute
    key, _ = auth.create_api_key(ports, unique("tenant-quota"))
    # When it starts three runs within one minute
    answers = [_start(host, key) for _ in range(3)]
    # Then the first two are created and the third is refused with the protocol's 429 and the rest of the minute
    assert [a.status for a in answers] == [201, 201, 429]
    assert answers[2].json["error"] == "rate_limited"
    assert answers[2].headers["retry-after"] == "50"
    # and another tenant is not affected (a fresh one: these runs carry the test's future clock in their listing)
    other, _ = auth.create_api_key(ports, unique("tenant-quota-other"))
    assert _start(host, other).status == 201
    # and once the minute has turned, the tenant may start runs again
    clock.ms += 50_000
    assert _start(host, key).status == 201


def test_no_quota_by_default(host):
    from shared.settings import get_settings

    # Given the default settings, a tenant's starts are never counted
    assert get_settings().run_starts_per_minute == 0
    assert all(_start(host, host.key_a).status == 201 for _ in range(3))
