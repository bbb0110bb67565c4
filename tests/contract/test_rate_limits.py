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


class _Competing:
    """The DynamoDB client with a competitor: before each of our first ``flips`` conditional updates, another writer
    moves the bucket into the case our update does not expect (idle <-> busy), always leaving room for a token, so
    our update loses the race and must decide again (every request reaches moto)."""

    def __init__(self, client, table: str, key: str, now_ms: int, flips: int) -> None:
        self._client, self._table, self._key, self._now, self.flips, self.updates = client, table, key, now_ms, flips, 0

    def update_item(self, **kw):
        self.updates += 1
        if self.flips:
            self.flips -= 1
            busy_expected = "BETWEEN" in kw["ConditionExpression"]
            tat = self._now - 1000 if busy_expected else self._now + 5
            self._client.put_item(
                TableName=self._table,
                Item={"pk": {"S": "RATE#" + self._key}, "sk": {"S": "bucket"}, "tat": {"N": str(tat)}},
            )
        return self._client.update_item(**kw)


def test_a_request_that_loses_many_races_is_admitted_not_refused(table):
    from shared.storage.ratelimit import DynamoRateLimiter
    from shared.wiring import _client

    # Given a bucket with room (100 a second, 400 at once) and a competitor that wins our first 10 races
    key, limit, t0 = unique("tenant-contended"), RateLimit(100, 400), 40_000_000
    client = _Competing(_client("dynamodb"), table, key, t0, flips=10)
    # When one request is taken
    decision = DynamoRateLimiter(client, table, lambda: t0).take(key, limit, t0)
    # Then it is admitted after deciding again each time (contention is retried, never refused)
    assert decision.allowed and client.updates == 11 and client.flips == 0


def test_a_request_whose_clock_went_stale_is_decided_at_the_time_of_its_write(table):
    from shared.storage.ratelimit import DynamoRateLimiter
    from shared.wiring import _client

    # Given a bucket of 3 tokens a token every 500 ms, emptied by another process at t0 + 400
    key, limit, t0 = unique("tenant-stale"), RateLimit(2, 3), 50_000_000
    assert all(_limiter(table).take(key, limit, t0 + 400).allowed for _ in range(3))
    # When a request that read its clock at t0 reaches the bucket when the clock reads t0 + 1000 (a token is back)
    late = DynamoRateLimiter(_client("dynamodb"), table, lambda: t0 + 1000)
    # Then it is admitted, and the next one at that time is refused for the rest of a token's time
    assert late.take(key, limit, t0).allowed
    refused = late.take(key, limit, t0 + 1000)
    assert not refused.allowed and 0 < refused.retry_after_ms <= 500


def test_twenty_slow_concurrent_writers_below_the_rate_get_no_refusal(table):
    import random
    import time

    from shared.storage.ratelimit import DynamoRateLimiter
    from shared.wiring import _client

    class Slow:
        """Each write takes 1-30 ms to reach the table and 0-20 ms to come back, so others are admitted meanwhile."""

        def __init__(self, client) -> None:
            self._client = client

        def update_item(self, **kw):
            time.sleep(random.uniform(0.001, 0.03))
            answer = self._client.update_item(**kw)
            time.sleep(random.uniform(0.0, 0.02))
            return answer

    def now_ms() -> int:
        return int(time.time() * 1000)

    # Given 4 function instances on one bucket far above the load (200 a second, 400 at once)
    key, limit = unique("tenant-slow"), RateLimit(200, 400)
    limiters = [DynamoRateLimiter(Slow(_client("dynamodb")), table, now_ms) for _ in range(4)]
    refused: list[int] = []

    def writer(i: int) -> None:
        for _ in range(10):
            read_at = now_ms()  # the request reads its clock, then spends a while before the bucket
            time.sleep(random.uniform(0, 0.05))
            decision = limiters[i % 4].take(key, limit, read_at)
            if not decision.allowed:
                refused.append(decision.retry_after_ms)

    # When 20 writers send 10 writes each, all at once
    threads = [threading.Thread(target=writer, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Then none of the 200 is refused
    assert refused == []
