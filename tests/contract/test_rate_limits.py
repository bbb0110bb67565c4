"""The per-key token buckets on moto (``shared.storage.ratelimit``): exact admission at any concurrency, a refusal
that says when the next token comes back, at most one write per admitted request and none for a remembered
refusal. (The build a new run records is stamped by the run-start service: test_deploy_safety, through the API.)"""

from __future__ import annotations

import threading

import pytest

from shared.ports import RateLimit
from tests.helpers import unique


@pytest.fixture()
def table(local_aws) -> str:
    from shared.settings import get_settings

    return get_settings().host_table


def _limiter(table: str):
    from shared.storage.ratelimit import DynamoRateLimiter
    from shared.wiring import _client

    return DynamoRateLimiter(_client("dynamodb"), table)


class _Counting:
    """The DynamoDB client, counting UpdateItem requests (a proxy, not a mock: every request reaches moto)."""

    def __init__(self, client) -> None:
        self._client, self.updates = client, 0

    def update_item(self, **kw):
        self.updates += 1
        return self._client.update_item(**kw)


def test_a_bucket_admits_its_burst_then_refuses_until_a_token_is_back(table):
    from shared.storage.ratelimit import DynamoRateLimiter
    from shared.wiring import _client

    # Given a bucket of 3 tokens refilled at 2 a second (a token every 500 ms), and a clock held still
    client = _Counting(_client("dynamodb"))
    limiter, key, limit, t0 = DynamoRateLimiter(client, table), unique("tenant-rl"), RateLimit(2, 3), 10_000_000
    # When 4 requests come at once
    answers = [limiter.take(key, limit, t0) for _ in range(4)]
    # Then 3 are admitted and the 4th is refused for exactly one token's time
    assert [a.allowed for a in answers] == [True, True, True, False]
    assert answers[3].retry_after_ms == 500
    updates = client.updates
    # and a refusal this process remembers costs no request while it holds
    assert not limiter.take(key, limit, t0 + 499).allowed and client.updates == updates
    # and once the token is back exactly one more is admitted
    assert limiter.take(key, limit, t0 + 500).allowed
    assert not limiter.take(key, limit, t0 + 500).allowed
    # and an idle bucket fills up again to its burst, not beyond
    later = t0 + 60_000
    assert [limiter.take(key, limit, later).allowed for _ in range(4)] == [True, True, True, False]


def test_a_request_whose_clock_went_stale_is_never_told_to_wait_past_one_token(table):
    # Given a bucket of 3 tokens a token every 500 ms, emptied by one process at t0 + 400
    key, limit, t0 = unique("tenant-rl"), RateLimit(2, 3), 10_000_000
    assert all(_limiter(table).take(key, limit, t0 + 400).allowed for _ in range(3))
    # When another process's request, which read its clock at t0 (before those), reaches the bucket
    late = _limiter(table).take(key, limit, t0)
    # Then it is refused, told to come back within one token's time (its own delay is not the bucket's)
    assert not late.allowed and late.retry_after_ms == 500


def test_buckets_shared_by_many_processes_admit_exactly_the_burst(table):
    # Given 8 "function instances" (each its own limiter and client) racing on one bucket of 10 tokens at one instant
    key, limit, t0 = unique("tenant-race"), RateLimit(1, 10), 20_000_000
    limiters = [_limiter(table) for _ in range(8)]
    admitted: list[bool] = []
    lock, barrier = threading.Lock(), threading.Barrier(8)

    def flood(limiter) -> None:
        barrier.wait()
        for _ in range(5):
            ok = limiter.take(key, limit, t0).allowed
            with lock:
                admitted.append(ok)

    threads = [threading.Thread(target=flood, args=(lim,)) for lim in limiters]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Then of 40 requests exactly the bucket's 10 are admitted: the conditional writes serialize the instances
    assert len(admitted) == 40 and admitted.count(True) == 10


def test_tenants_have_their_own_buckets(table):
    limiter, limit, t0 = _limiter(table), RateLimit(1, 2), 30_000_000
    a, b = unique("tenant-a-rl"), unique("tenant-b-rl")
    # Given tenant A's bucket emptied
    assert [limiter.take(a, limit, t0).allowed for _ in range(3)] == [True, True, False]
    # Then tenant B's is whole
    assert [limiter.take(b, limit, t0).allowed for _ in range(3)] == [True, True, False]
