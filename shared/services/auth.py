"""Bearer API keys -> the caller. Keys are stored hashed (SHA-256) in the host table, never in env vars."""

from __future__ import annotations

import hashlib
import threading
from typing import Any

from shared.errors import UnauthenticatedError
from shared.ports import Ports
from shared.services.common import Caller

_cache: dict[str, tuple[Caller | None, int]] = {}
_lock = threading.Lock()
CACHE_MS = 60_000
APIKEY_PK = "APIKEY"


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def put_api_key(ports: Ports, key: str, tenant: str, subject_id: str | None = None) -> None:
    ports.host.put_item(APIKEY_PK, key_hash(key), {"tenant": tenant, "subjectId": subject_id or f"key-{tenant}"})
    with _lock:
        _cache.pop(key_hash(key), None)


def resolve_caller(ports: Ports, authorization: str | None) -> Caller:
    if not authorization or not authorization.startswith("Bearer "):
        raise UnauthenticatedError()
    key = authorization[len("Bearer "):].strip()
    if not key or len(key) > 512:
        raise UnauthenticatedError()
    h = key_hash(key)
    now = ports.clock.now_ms()
    with _lock:
        hit = _cache.get(h)
    if hit is not None and now - hit[1] < CACHE_MS:
        caller = hit[0]
    else:
        item: dict[str, Any] | None = ports.host.get_item(APIKEY_PK, h)
        caller = Caller(str(item["tenant"]), str(item["subjectId"])) if item else None
        with _lock:
            _cache[h] = (caller, now)
    if caller is None:
        raise UnauthenticatedError()
    return caller
