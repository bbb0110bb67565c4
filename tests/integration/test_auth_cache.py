"""The API-key cache is bounded (a flood of unknown keys neither grows it nor evicts real keys) and expires.

Key lookups go to the host table on moto; the cache clock is injected (cachetools' ``timer``), so nothing sleeps.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from shared.errors import UnauthenticatedError
from shared.storage import schema
from tests.helpers import unique


class GetItemCounter:
    """Counts GetItem requests on a client; with ``answer_absent`` it answers them itself with DynamoDB's reply for
    a key that does not exist (as it would for random keys), so a 10,000-key flood does not take a minute."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls = 0
        self.answer_absent = False
        self.thread = threading.get_ident()  # the test's own: the host's threads share this client for other runs
        client.meta.events.register("before-call.dynamodb.GetItem", self)

    def __call__(self, **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        if threading.get_ident() != self.thread:
            return None
        self.calls += 1
        if self.answer_absent:
            return AWSResponse("http://local", 200, {}, None), {"ResponseMetadata": {"HTTPStatusCode": 200}}
        return None

    def remove(self) -> None:
        self.client.meta.events.unregister("before-call.dynamodb.GetItem", self)


@pytest.fixture()
def ports(local_aws):
    from shared.wiring import get_ports

    return get_ports()


@pytest.fixture()
def get_items(ports) -> Iterator[GetItemCounter]:
    counter = GetItemCounter(ports.host._c)
    yield counter
    counter.remove()


def test_a_flood_of_unknown_keys_leaves_the_cache_bounded_and_real_keys_cached(ports, timer, get_items):
    from shared.services import auth

    # Given a real key, resolved once (one GetItem) and so cached
    real = unique("key-real")
    auth.put_api_key(ports, real, "tenant-a")
    assert auth.resolve_caller(ports, f"Bearer {real}").tenant == "tenant-a"
    assert get_items.calls == 1
    # When 10,000 distinct unknown keys are tried
    get_items.answer_absent = True
    for i in range(10_000):
        with pytest.raises(UnauthenticatedError):
            auth.resolve_caller(ports, f"Bearer random-{i:05d}")
    get_items.answer_absent = False
    # Then each was looked up once, and the cache holds the one real key and at most MISS_MAX unknown ones
    assert get_items.calls == 1 + 10_000
    assert auth.cache_sizes() == (1, auth.MISS_MAX)
    assert auth.MISS_MAX <= 256
    # and the real key still resolves without a read
    assert auth.resolve_caller(ports, f"Bearer {real}").tenant == "tenant-a"
    assert get_items.calls == 1 + 10_000
    # and a repeated unknown key within its short TTL costs no read either
    with pytest.raises(UnauthenticatedError):
        auth.resolve_caller(ports, "Bearer random-09999")
    assert get_items.calls == 1 + 10_000


def test_a_revoked_key_stops_working_once_its_cache_entry_expires(ports, timer, get_items):
    from shared.services import auth

    # Given a key that was resolved (and cached)
    key = unique("key-revoked")
    auth.put_api_key(ports, key, "tenant-b")
    assert auth.resolve_caller(ports, f"Bearer {key}").tenant == "tenant-b"
    # When it is revoked (its host-table item deleted)
    ports.host._c.delete_item(
        TableName=ports.settings.host_table,
        Key={"pk": {"S": schema.APIKEY_PK}, "sk": {"S": auth.key_hash(auth.peppers(ports).current, key)}},
    )
    # Then it still works from the cache just before the TTL ...
    timer.now += auth.HIT_TTL_S - 1
    assert auth.resolve_caller(ports, f"Bearer {key}").tenant == "tenant-b"
    assert get_items.calls == 1
    # ... and is refused once the TTL has passed (a fresh read finds nothing)
    timer.now += 2
    with pytest.raises(UnauthenticatedError):
        auth.resolve_caller(ports, f"Bearer {key}")
    assert get_items.calls == 2
    assert auth.HIT_TTL_S == 60
