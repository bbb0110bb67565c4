"""Bearer API keys -> the caller. Keys are stored hashed (SHA-256) in the host table, never in env vars.

Lookups are cached per container in two bounded TTL caches: known keys (``HIT_MAX`` entries for ``HIT_TTL_S``)
and unknown keys (``MISS_MAX`` for ``MISS_TTL_S``). A flood of random keys only churns the small miss cache: it
can neither grow memory nor evict a real key. A revoked key stops working at most ``HIT_TTL_S`` later.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from typing import Any

from cachetools import TTLCache

from shared.errors import UnauthenticatedError
from shared.ports import Ports
from shared.services.common import Caller

APIKEY_PK = "APIKEY"
HIT_MAX, HIT_TTL_S = 1024, 60.0
MISS_MAX, MISS_TTL_S = 256, 5.0

_lock = threading.Lock()
_hits: TTLCache[str, Caller] = TTLCache(HIT_MAX, HIT_TTL_S, timer=time.monotonic)
_misses: TTLCache[str, bool] = TTLCache(MISS_MAX, MISS_TTL_S, timer=time.monotonic)


def reset_cache(timer: Callable[[], float] = time.monotonic) -> None:
    """Empty both caches and (tests) give them another timer, in seconds."""
    global _hits, _misses
    with _lock:
        _hits = TTLCache(HIT_MAX, HIT_TTL_S, timer=timer)
        _misses = TTLCache(MISS_MAX, MISS_TTL_S, timer=timer)


def cache_sizes() -> tuple[int, int]:
    """(known keys, unknown keys) currently cached."""
    with _lock:
        return len(_hits), len(_misses)


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def put_api_key(ports: Ports, key: str, tenant: str, subject_id: str | None = None) -> None:
    ports.host.put_item(APIKEY_PK, key_hash(key), {"tenant": tenant, "subjectId": subject_id or f"key-{tenant}"})
    with _lock:
        _hits.pop(key_hash(key), None)
        _misses.pop(key_hash(key), None)


def resolve_caller(ports: Ports, authorization: str | None) -> Caller:
    if not authorization or not authorization.startswith("Bearer "):
        raise UnauthenticatedError()
    key = authorization[len("Bearer "):].strip()
    if not key or len(key) > 512:
        raise UnauthenticatedError()
    h = key_hash(key)
    with _lock:
        caller = _hits.get(h)
        known_unknown = caller is None and h in _misses
    if known_unknown:
        raise UnauthenticatedError()
    if caller is None:
        item: dict[str, Any] | None = ports.host.get_item(APIKEY_PK, h)
        with _lock:
            if item:
                caller = Caller(str(item["tenant"]), str(item["subjectId"]))
                _hits[h] = caller
            else:
                _misses[h] = True
    if caller is None:
        raise UnauthenticatedError()
    return caller
