"""Per-key token buckets in DynamoDB (the ``RateLimiter`` port): one conditional ``UpdateItem`` per request.

A bucket is one item of the host table (``pk = RATE#<key>``, ``sk = bucket``) holding one number: its *theoretical
arrival time* ``tat`` in epoch ms (the generic cell rate algorithm, a token bucket kept as the time at which it will
be full again). With ``i = 1000 / per_second`` ms per token and room for ``burst`` tokens (``tau = burst * i``), a
request at ``now`` is admitted iff ``max(tat, now) + i - now <= tau``, and then ``tat = max(tat, now) + i``.
DynamoDB cannot take a max in an update, so the two cases are two conditional updates:

- idle (``tat`` absent or in the past): ``SET tat = now + i`` if ``attribute_not_exists(tat) OR tat < now``;
- busy (``tat`` from ``now`` on): ``SET tat = tat + i`` if ``tat BETWEEN now AND now + tau - i``.

The first update tried is the case the bucket was in when this process last saw it; a failed condition returns the
item (``ReturnValuesOnConditionCheckFailure``), so the second case is tried only when it can succeed, and a refusal
needs no further request: at most two writes, usually one. Concurrent requests from any number of functions are
serialized by the conditions (a race loses, reads the new ``tat`` and decides again, at the clock's reading after
the write it lost, never the one the request came with: contention is retried, never refused). A refusal writes
nothing and
says exactly when the next token comes back (``Retry-After``); until then this process refuses that key without a
request (the bucket's ``tat`` only moves forward, so the refusal stays right whatever other processes do). The item
expires (TTL) a day after its bucket is full again.

A bucket's item takes at most ``per_second`` admitted writes a second plus one refused write per process and
refusal window; DynamoDB's per-key limit is 1,000 writes a second, far above any per-tenant rate this host uses.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from shared.errors import StorageError
from shared.ports import RateDecision, RateLimit
from shared.storage import schema

PREFIX = "RATE#"
SK = "bucket"
KEEP_S = 86_400  # an idle bucket's item lives a day past the time it is full again
# Conditional races lost in a row before the request is refused for a token's time. Each lost race is another
# request admitted (or the bucket turning idle), so a request loses at most as many as there are requests racing it:
# the cap only bounds a pathological store, never ordinary contention (20 writers racing lose a handful).
MAX_TRIES = 64
# DynamoDB refusing the bucket's writes (after botocore's retries): the key is hotter than a partition takes
THROTTLED = frozenset({"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"})
THROTTLED_RETRY_MS = 1000


class _Throttled(Exception):
    pass


class DynamoRateLimiter:
    def __init__(self, client: Any, table: str, now_ms: Callable[[], int] | None = None) -> None:
        self._c = client
        self._t = table
        self._now = now_ms  # the clock read again after a lost race or a refusal (None: the request's time only)
        self._lock = threading.Lock()
        self._tat: dict[str, int] = {}  # the last tat this process saw, per key: which case to try first
        self._refused_until: dict[str, int] = {}  # keys this process refuses without a request, until (epoch ms)

    def take(self, key: str, limit: RateLimit, now_ms: int) -> RateDecision:
        step = 1000.0 / limit.per_second  # ms per token
        lim = now_ms + limit.burst * step - step  # the latest tat at which one more token is admitted
        with self._lock:
            until = self._refused_until.get(key, 0)
            seen = self._tat.get(key)
        if now_ms < until and self._now is not None:
            now_ms = max(now_ms, self._now())  # a stale reading must not extend a remembered refusal
        if now_ms < until:
            return RateDecision(False, until - now_ms)
        lim = now_ms + limit.burst * step - step
        busy = seen is not None and seen >= now_ms
        for attempt in range(MAX_TRIES):
            if attempt:  # a race was lost: decide again at the time of this write, not the request's stale reading
                now_ms, lim = self._fresh(now_ms, limit.burst, step)
            try:
                admitted, tat = self._update(key, step, now_ms, lim, busy)
            except _Throttled:  # a flood hotter than DynamoDB takes on one key is refused too, never a 5xx
                return RateDecision(False, THROTTLED_RETRY_MS)
            if admitted and tat is not None:
                self._remember(key, tat, 0)
                return RateDecision(True)
            if tat is not None and tat > lim and self._now is not None:
                fresh, fresh_lim = self._fresh(now_ms, limit.burst, step)
                if tat <= fresh_lim:  # the request's clock reading was stale: at the write's time a token is back
                    now_ms, lim, busy = fresh, fresh_lim, tat >= fresh
                    continue
            if tat is not None and tat > lim:  # empty: refused until one token is back
                # At most one token's time: every admitted request left tat <= its own now + tau, so in real time
                # a token is back within ``step``. A request whose now_ms went stale while others were admitted
                # (a loaded process) would otherwise count its own delay into Retry-After.
                wait = min(math.ceil(tat - lim), math.ceil(step))
                self._remember(key, tat, now_ms + wait)
                return RateDecision(False, wait)
            busy = tat is not None and tat >= now_ms  # the other case holds: try it
        return RateDecision(False, math.ceil(step))  # lost every race: the bucket is contended, come back in a token

    def _fresh(self, now_ms: int, burst: int, step: float) -> tuple[int, float]:
        """The clock read again (never earlier than ``now_ms``), and the latest admissible ``tat`` at that time."""
        fresh = max(now_ms, self._now()) if self._now is not None else now_ms
        return fresh, fresh + burst * step - step

    def _update(self, key: str, step: float, now_ms: int, lim: float, busy: bool) -> tuple[bool, int | None]:
        """One conditional update: (admitted, the bucket's tat after it, or as found when refused; None: no item)."""
        if busy:
            expr, cond = "SET tat = tat + :i, #e = :exp", "tat BETWEEN :now AND :lim"
            values = {":i": {"N": str(round(step))}, ":now": {"N": str(now_ms)}, ":lim": {"N": str(math.floor(lim))}}
        else:
            expr, cond = "SET tat = :next, #e = :exp", "attribute_not_exists(tat) OR tat < :now"
            values = {":next": {"N": str(now_ms + round(step))}, ":now": {"N": str(now_ms)}}
        expires = (math.ceil(lim) + round(step)) // 1000 + KEEP_S
        values[":exp"] = {"N": str(expires)}
        try:
            resp = self._c.update_item(
                TableName=self._t,
                Key={"pk": {"S": PREFIX + key}, "sk": {"S": SK}},
                UpdateExpression=expr,
                ConditionExpression=cond,
                ExpressionAttributeNames={"#e": schema.TTL_ATTRIBUTE},
                ExpressionAttributeValues=values,
                ReturnValues="UPDATED_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code in THROTTLED:
                raise _Throttled from exc
            if code != "ConditionalCheckFailedException":
                raise StorageError("the rate limiter's bucket could not be updated") from exc
            item = exc.response.get("Item") or {}
            return False, int(item["tat"]["N"]) if "tat" in item else None
        return True, int(resp["Attributes"]["tat"]["N"])

    def _remember(self, key: str, tat: int, refused_until: int) -> None:
        with self._lock:
            if len(self._tat) > 10_000:  # bounded: a process that saw many tenants forgets the oldest knowledge
                self._tat.clear()
                self._refused_until.clear()
            self._tat[key] = tat
            if refused_until:
                self._refused_until[key] = refused_until
            else:
                self._refused_until.pop(key, None)
