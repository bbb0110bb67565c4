"""What the events stream's consumer (``functions/fanout_webhooks``) must know of a tenant, read together by one
eventually consistent Query of the partition ``WEBHOOK#<tenant>``: its webhook subscriptions (sk: the webhook id,
``<tenant>/<ULID>``) and the version of its sampling rules (sk ``#rules``: a fresh ULID written after each rule is
registered or deleted; absent while the tenant never had a rule). docs/decisions/0116-honest-costs.md,
docs/decisions/0124-sampling-rules-freshness.md, docs/decisions/0151-fan-out-by-the-batch.md.

The warm process keeps each answer a short while (read on its clock before the Query was sent): one without a
subscription for ``NO_SUBSCRIBER_CACHE_S``, one with subscriptions for the setting ``webhook_subscription_cache_s``
(2 s by default). So a tenant costs one Query per that many seconds and process, not one per stream batch. A
registration cannot reach those processes, so whatever changes what a kept answer says outlasts it instead
(``outlast``): every answer given before its write, and every eventually consistent one that may not reflect it yet
(``EVENTUAL_READ_LAG_S``), has expired when it returns. A tenant's first subscription and every rule change wait.
A subscription registered beside a settled one does not: a run's first batch in a process reads its tenant afresh
(``read(fresh=True)``), so the runs started after the 201 are fanned out to it, and the runs already going are from
at most the cache's life (plus that lag) after it. An unregistered subscription stops at once all the same: a
delivery reads its subscription first, strongly consistent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from shared.caches import LockedLRUCache
from shared.ports import Ports

NO_SUBSCRIBER_CACHE_S = 2.0
# An eventually consistent read reflects every write that answered at least this long before it was sent (DynamoDB:
# "usually within a second"): an answer may be that much older than its Query.
EVENTUAL_READ_LAG_S = 1.0
# A subscription written longer ago than this (its createdAt, read just before its write) was visible to every
# Query sent since: a tenant that has one needs no wait.
SUBSCRIPTION_SETTLED_S = 60.0
_NO_SUBSCRIBERS_MAX = 4096
_SUBSCRIBED_MAX = 4096
# tenant -> (clock ms of the Query, its rules version)
_NO_SUBSCRIBERS: LockedLRUCache[str, tuple[int, str | None]] = LockedLRUCache(maxsize=_NO_SUBSCRIBERS_MAX)
# tenant -> (clock ms of the Query, its answer)
_SUBSCRIBED: LockedLRUCache[str, tuple[int, Interest]] = LockedLRUCache(maxsize=_SUBSCRIBED_MAX)


@dataclass(frozen=True)
class Interest:
    subscriptions: list[dict[str, Any]]
    rules_version: str | None  # None: the tenant never had a sampling rule


def subscription_cache_s(ports: Ports) -> float:
    """How long a warm process keeps an answer with subscriptions (the setting ``webhook_subscription_cache_s``)."""
    return max(0.0, float(ports.settings.webhook_subscription_cache_s))


def read(ports: Ports, tenant: str, *, fresh: bool = False) -> Interest:
    """The tenant's subscriptions and rules version; a kept answer comes without a request while it is younger than
    its cache's life (a clock that went back does not extend it), else one eventually consistent Query. ``fresh``:
    not a kept answer with subscriptions (the fan-out asks so for a run it has not seen yet, so a run started after
    a registration answered is fanned out to it)."""
    now = ports.clock.now_ms()
    cached = _NO_SUBSCRIBERS.get(tenant)
    if cached is not None and 0 <= now - cached[0] < NO_SUBSCRIBER_CACHE_S * 1000:
        return Interest([], cached[1])
    kept = None if fresh else _SUBSCRIBED.get(tenant)
    if kept is not None and 0 <= now - kept[0] < subscription_cache_s(ports) * 1000:
        return kept[1]
    subs, version = ports.webhooks.get_interest(tenant)
    answer = Interest(subs, version)
    if subs:
        _NO_SUBSCRIBERS.pop(tenant, None)
        _SUBSCRIBED[tenant] = (now, answer)
    else:
        _SUBSCRIBED.pop(tenant, None)
        _NO_SUBSCRIBERS[tenant] = (now, version)
    return answer


def known_without_subscribers(tenant: str) -> bool:
    """Whether this process has found the tenant without a subscription (its answer may have expired since): the
    fan-out reads ahead only the facts of runs whose tenant may have one."""
    return tenant in _NO_SUBSCRIBERS


def outlast(ports: Ports, existing: Iterable[dict[str, Any]], *, always: bool = False) -> None:
    """After a write that changes what a kept answer says: unless the tenant held a settled subscription
    (``existing``, its subscriptions as read before the write: then no process holds an answer without one) and the
    change is not ``always`` to be seen (a rule's: answers with subscriptions carry the rules version too), wait out
    the caches and an eventually consistent read's lag (plus a quarter second), so every event stored after the
    caller answers is handled with the change."""
    from shared.clock import ms_from_iso

    settled_before = ports.clock.now_ms() - (SUBSCRIPTION_SETTLED_S + NO_SUBSCRIBER_CACHE_S) * 1000
    if not always and any(ms_from_iso(str(doc["createdAt"])) < settled_before for doc in existing):
        return
    ports.clock.sleep(max(NO_SUBSCRIBER_CACHE_S, subscription_cache_s(ports)) + EVENTUAL_READ_LAG_S + 0.25)


def rules_changed(ports: Ports, tenant: str) -> None:
    """After a rule of the tenant was written or deleted: a new rules version, then every kept answer outlasted
    (one PutItem, and the wait)."""
    ports.webhooks.put_rules_version(tenant, {"version": ports.ids.ulid(), "changedAt": ports.clock.iso()})
    outlast(ports, [], always=True)
