"""The warm-process caches hold under several threads of one process (the local host's shape)."""

from __future__ import annotations

import itertools
import sys
import threading
from collections.abc import Iterator, MutableMapping
from typing import Any

import pytest

from shared.caches import LockedLRUCache, LockedTTLCache


@pytest.fixture
def eager_switching() -> Iterator[None]:
    """Threads switch after every few bytecodes, so a race inside a cache operation shows within a short loop."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def hammer(cache: MutableMapping[int, int], threads: int = 4, rounds: int = 10_000) -> list[str]:
    """Read-or-fill on a few more keys than the cache holds, from several threads; the errors raised."""
    errors: list[str] = []

    def work(t: int) -> None:
        try:
            for i in range(rounds):
                key = (t * 7 + i) % 5
                if cache.get(key) is None:
                    cache[key] = i
                if i % 97 == 0:
                    cache.pop((key + 1) % 5, None)
        except Exception as exc:  # noqa: BLE001 - the race shows as any exception (KeyError, RuntimeError)
            errors.append(repr(exc))

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return errors


@pytest.mark.usefixtures("eager_switching")
def test_an_lru_cache_evicting_under_concurrent_reads_raises_nothing() -> None:
    # Given an LRU cache of 2 entries
    cache: LockedLRUCache[int, int] = LockedLRUCache(maxsize=2)

    # When 4 threads read, fill and drop 5 keys through it (plain cachetools raised KeyError in popitem here)
    errors = hammer(cache)

    # Then no operation failed and the cache holds at most its size
    assert errors == []
    assert len(cache) <= 2


@pytest.mark.usefixtures("eager_switching")
def test_a_ttl_cache_expiring_under_concurrent_reads_raises_nothing() -> None:
    # Given a TTL cache of 2 entries on a clock that advances a tick per reading, so entries expire as it runs
    ticks = itertools.count()
    cache: LockedTTLCache[int, int] = LockedTTLCache(maxsize=2, ttl=50, timer=lambda: next(ticks))

    # When 4 threads read, fill and drop 5 keys through it
    errors = hammer(cache)

    # Then no operation failed
    assert errors == []
    assert len(cache) <= 2


def test_a_locked_cache_answers_like_the_cache_it_wraps() -> None:
    # Given a locked LRU cache of 2 entries
    cache: LockedLRUCache[str, Any] = LockedLRUCache(maxsize=2)

    # When three keys go in, the first read back in between
    cache["a"] = 1
    cache["b"] = 2
    assert cache["a"] == 1
    cache["c"] = 3

    # Then the least recently used went, and the mapping operations answer as cachetools' do
    assert sorted(cache) == ["a", "c"]
    assert "b" not in cache and cache.get("b", "none") == "none"
    assert cache.pop("a") == 1 and cache.setdefault("d", 4) == 4
    with pytest.raises(KeyError):
        cache["b"]
    cache.clear()
    assert len(cache) == 0
