"""Bearer API keys -> the caller, and the operator's key management (create, list, revoke, pepper rotation).

A key is stored only as HMAC-SHA-256 under a pepper held in Secrets Manager (the ``pepper`` secret of the
manifest, read through the SecretStore port once per cold start and again at most every
``apikey_pepper_max_age_s``): a copy of the host table alone cannot test guesses. The pepper secret is the JSON
object ``{"current": ..., "previous": ...}``; keys verify under either, new keys are hashed under ``current``
(rotation: docs/operations.md). Keys are stored through ``Ports.api_keys`` (``shared.storage.apikeys``): the
lookup by hash a request reads, the reference by key id ``keys revoke KEY_ID`` finds, the listing ``keys list``
shows (never the key).

Lookups are cached per container in two bounded TTL caches, keyed by an in-memory digest of the presented key:
known keys (``HIT_MAX`` entries for ``HIT_TTL_S``) and unknown keys (``MISS_MAX`` for ``MISS_TTL_S``). A flood of
random keys only churns the small miss cache: it can neither grow memory nor evict a real key. A revoked key
stops working at most ``HIT_TTL_S`` later.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared.caches import LockedTTLCache
from shared.errors import UnauthenticatedError
from shared.ports import Ports
from shared.services.common import Caller

KEY_PREFIX = "owk_"
HIT_MAX, HIT_TTL_S = 1024, 60.0
MISS_MAX, MISS_TTL_S = 256, 5.0

_lock = threading.Lock()
_hits: LockedTTLCache[str, Caller] = LockedTTLCache(HIT_MAX, HIT_TTL_S, timer=time.monotonic)
_misses: LockedTTLCache[str, bool] = LockedTTLCache(MISS_MAX, MISS_TTL_S, timer=time.monotonic)


def reset_cache(timer: Callable[[], float] = time.monotonic) -> None:
    """Empty both caches and (tests) give them another timer, in seconds."""
    global _hits, _misses
    with _lock:
        _hits = LockedTTLCache(HIT_MAX, HIT_TTL_S, timer=timer)
        _misses = LockedTTLCache(MISS_MAX, MISS_TTL_S, timer=timer)


def cache_sizes() -> tuple[int, int]:
    """(known keys, unknown keys) currently cached."""
    with _lock:
        return len(_hits), len(_misses)


# --------------------------------------------------------------------------- peppers and hashes


@dataclass(frozen=True)
class Peppers:
    current: str
    previous: str | None = None

    def all(self) -> tuple[str, ...]:
        return (self.current,) if not self.previous else (self.current, self.previous)

    def to_json(self) -> str:
        doc = {"current": self.current, **({"previous": self.previous} if self.previous else {})}
        return json.dumps(doc, separators=(",", ":"))


def parse_peppers(value: str) -> Peppers:
    """The pepper secret's value: ``{"current": ..., "previous": ...}``; a plain string is the current pepper."""
    try:
        doc = json.loads(value)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("current"), str) and doc["current"]:
        previous = doc.get("previous")
        return Peppers(doc["current"], previous if isinstance(previous, str) and previous else None)
    if not value:
        raise ValueError("the API-key pepper secret is empty")
    return Peppers(value)


def peppers(ports: Ports) -> Peppers:
    s = ports.settings
    return parse_peppers(ports.secrets.get_secret(s.apikey_pepper_secret_id, max_age_s=s.apikey_pepper_max_age_s))


def key_hash(pepper: str, key: str) -> str:
    """What the host table stores for ``key``: HMAC-SHA-256 under the pepper, hex."""
    return hmac.new(pepper.encode("utf-8"), key.encode("utf-8"), hashlib.sha256).hexdigest()


def pepper_id(pepper: str) -> str:
    """A short, non-reversible name of a pepper (which pepper a key was hashed under, for ``keys list``)."""
    return hmac.new(pepper.encode("utf-8"), b"openwop-serverless pepper id", hashlib.sha256).hexdigest()[:12]


def _cache_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- key management


def put_api_key(
    ports: Ports, key: str, tenant: str, subject_id: str | None = None, *, key_id: str | None = None, name: str = ""
) -> str:
    """Store ``key`` for ``tenant`` (hashed under the current pepper). Returns its key id. Idempotent per key id.

    Written listing first and lookup last, so a key is usable only once it can also be listed and revoked.
    """
    pepper = peppers(ports).current
    h = key_hash(pepper, key)
    kid = key_id or f"seed-{h[:16]}"
    created = ports.clock.iso()
    ports.api_keys.put_key(
        kid,
        h,
        tenant=tenant,
        listing={"keyId": kid, "name": name, "createdAt": created, "pepperId": pepper_id(pepper)},
        lookup={"tenant": tenant, "subjectId": subject_id or f"key-{tenant}", "keyId": kid},
    )
    with _lock:
        _hits.pop(_cache_key(key), None)
        _misses.pop(_cache_key(key), None)
    return kid


def create_api_key(ports: Ports, tenant: str, name: str = "") -> tuple[str, dict[str, str]]:
    """A new random key for ``tenant``: (the key, shown once; its metadata)."""
    if not tenant.strip():
        raise ValueError("a tenant is required")
    key = KEY_PREFIX + ports.ids.token(32)
    kid = "key-" + ports.ids.ulid().lower()
    put_api_key(ports, key, tenant, subject_id=kid, key_id=kid, name=name)
    return key, {"keyId": kid, "tenant": tenant, "name": name}


def list_api_keys(ports: Ports, tenant: str) -> list[dict[str, str]]:
    """The tenant's keys: id, name, creation time and whether their pepper is current; never a key or a hash."""
    p = peppers(ports)
    state = {pepper_id(p.current): "current", **({pepper_id(p.previous): "previous"} if p.previous else {})}
    out = []
    for kid, item in ports.api_keys.list_keys(tenant):
        out.append(
            {
                "keyId": kid,
                "name": str(item.get("name", "")),
                "createdAt": str(item.get("createdAt", "")),
                "pepper": state.get(str(item.get("pepperId")), "retired"),
            }
        )
    return out


def revoke_api_key(ports: Ports, key_id: str) -> bool:
    """Delete the key: lookup first (it stops authenticating within ``HIT_TTL_S``), then its listing. False if
    there is no such key id."""
    ref = ports.api_keys.get_key(key_id)
    if ref is None:
        return False
    ports.api_keys.delete_key(key_id, str(ref["hash"]), tenant=str(ref["tenant"]))
    return True


def rotate_pepper(ports: Ports) -> Peppers:
    """Start a rotation: a new current pepper, the old one kept as previous (its keys still verify)."""
    old = peppers(ports)
    new = Peppers(ports.ids.token(48), old.current)
    ports.secrets.update_secret(ports.settings.apikey_pepper_secret_id, new.to_json())
    return new


def finish_pepper_rotation(ports: Ports) -> Peppers:
    """End a rotation: drop the previous pepper. Keys still hashed under it stop working (``keys list`` shows them
    as ``previous`` beforehand)."""
    now = Peppers(peppers(ports).current)
    ports.secrets.update_secret(ports.settings.apikey_pepper_secret_id, now.to_json())
    return now


# --------------------------------------------------------------------------- request path


def resolve_caller(ports: Ports, authorization: str | None) -> Caller:
    if not authorization or not authorization.startswith("Bearer "):
        raise UnauthenticatedError()
    key = authorization[len("Bearer ") :].strip()
    if not key or len(key) > 512:
        raise UnauthenticatedError()
    ck = _cache_key(key)
    with _lock:
        caller = _hits.get(ck)
        known_unknown = caller is None and ck in _misses
    if known_unknown:
        raise UnauthenticatedError()
    if caller is None:
        item: dict[str, Any] | None = None
        for pepper in peppers(ports).all():
            item = ports.api_keys.get_by_hash(key_hash(pepper, key))
            if item:
                break
        with _lock:
            if item:
                caller = Caller(str(item["tenant"]), str(item["subjectId"]), str(item.get("keyId") or ""))
                _hits[ck] = caller
            else:
                _misses[ck] = True
    if caller is None:
        raise UnauthenticatedError()
    return caller
