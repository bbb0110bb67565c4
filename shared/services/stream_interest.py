"""What the events stream's consumer (``functions/fanout_webhooks``) must know of a tenant, read together by one
strongly consistent Query of the partition ``WEBHOOK#<tenant>``: its webhook subscriptions (sk: the webhook id,
``<tenant>/<ULID>``) and the version of its sampling rules (sk ``#rules``: a fresh ULID written after each rule is
registered or deleted; absent while the tenant never had a rule). docs/decisions/0116-honest-costs.md,
docs/decisions/0124-sampling-rules-freshness.md.

An answer without a subscription is kept by the warm process for ``NO_SUBSCRIBER_CACHE_S`` (read on its clock
before the Query was sent), so a tenant without webhooks costs one Query per that many seconds and process, not one
per stream batch, whether or not it has rules. A registration cannot reach those processes, so whatever changes
what such an answer says (a tenant's first subscription, any rule change) outlasts it instead (``outlast``): every
answer given before its write has expired when it returns. Subscriptions found are never cached (an unregistered
one stops at once).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from shared.ports import Ports
from shared.services.common import remember

NO_SUBSCRIBER_CACHE_S = 2.0
# A subscription written longer ago than this (its createdAt, read just before its write) was visible to every
# Query sent since: a tenant that has one needs no wait.
SUBSCRIPTION_SETTLED_S = 60.0
_NO_SUBSCRIBERS: dict[str, tuple[int, str | None]] = {}  # tenant -> (clock ms of the Query, its rules version)
_NO_SUBSCRIBERS_MAX = 4096


@dataclass(frozen=True)
class Interest:
    subscriptions: list[dict[str, Any]]
    rules_version: str | None  # None: the tenant never had a sampling rule


def read(ports: Ports, tenant: str) -> Interest:
    """The tenant's subscriptions and rules version; an answer without subscriptions comes without a request while
    it is younger than the cache's life (a clock that went back does not extend it)."""
    now = ports.clock.now_ms()
    cached = _NO_SUBSCRIBERS.get(tenant)
    if cached is not None and 0 <= now - cached[0] < NO_SUBSCRIBER_CACHE_S * 1000:
        return Interest([], cached[1])
    subs, version = ports.webhooks.get_interest(tenant)
    if subs:
        _NO_SUBSCRIBERS.pop(tenant, None)
    else:
        remember(_NO_SUBSCRIBERS, tenant, (now, version), _NO_SUBSCRIBERS_MAX)
    return Interest(subs, version)


def known_without_subscribers(tenant: str) -> bool:
    """Whether this process has found the tenant without a subscription (its answer may have expired since): the
    fan-out reads ahead only the facts of runs whose tenant may have one."""
    return tenant in _NO_SUBSCRIBERS


def outlast(ports: Ports, existing: Iterable[dict[str, Any]]) -> None:
    """After a write that changes what a cached answer says: unless the tenant held a settled subscription
    (``existing``, its subscriptions as read before the write: then no process holds an answer without one), wait
    out the cache (NO_SUBSCRIBER_CACHE_S plus a quarter second), so every event stored after the caller answers is
    handled with the change."""
    from shared.clock import ms_from_iso

    settled_before = ports.clock.now_ms() - (SUBSCRIPTION_SETTLED_S + NO_SUBSCRIBER_CACHE_S) * 1000
    if any(ms_from_iso(str(doc["createdAt"])) < settled_before for doc in existing):
        return
    ports.clock.sleep(NO_SUBSCRIBER_CACHE_S + 0.25)


def rules_changed(ports: Ports, tenant: str) -> None:
    """After a rule of the tenant was written or deleted: a new rules version, then every cached answer outlasted
    (one Query of the subscriptions, one PutItem, and the wait unless a subscription is settled)."""
    existing = [doc for _, doc in ports.webhooks.list_subscriptions(tenant, consistent=True)]
    ports.webhooks.put_rules_version(tenant, {"version": ports.ids.ulid(), "changedAt": ports.clock.iso()})
    outlast(ports, existing)
