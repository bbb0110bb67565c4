"""Webhooks (webhooks.md, RFC 0201/0188/0221): tenant-scoped subscriptions, fan-out of stored events to a queue,
and signed delivery through the egress guard.

Subscriptions live in the host table under ``WEBHOOK#<tenant>`` (sk = the bound webhookId), so a tenant's fan-out
reads only its own subscriptions (one Query, which also reads its sampling rules' version:
``shared.services.stream_interest``) and another tenant's id is never looked up. Their signing secrets do
not: they are sealed in the signing table (``shared.services.webhook_secrets``). Dead-letter records live
under ``WEBHOOKDL#<webhookId>`` with a TTL and carry no body, header or secret; each is linked under the run it
names (``HOSTITEM#``), so erasing the run deletes it.

The delivery path: the events table's stream (INSERT records: the event is already durably stored) invokes
``fan_out``, which writes one queue message per (subscription, event) into a FIFO queue grouped by (subscription,
run), deduplicated by the delivery id; the queue's consumer calls ``deliver`` per message. A failed attempt is
retried by the queue (backoff through the message's visibility), and after the last attempt the message moves to
the dead-letter queue with a record here naming it (``retries_exhausted``).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shared.caches import LockedLRUCache
from shared.errors import (
    MAX_FAULTS,
    IdTenantMismatchError,
    NotFoundError,
    ValidationError,
    WebhookEndpointUnverifiedError,
    WebhookUrlRejectedError,
    fault,
    invalid,
    invalid_at,
    invalid_parameter,
)
from shared.ports import EgressRefusedError, Ports, QueueMessage, TransportError
from shared.protocol import webhooks as wh
from shared.protocol.codemap import ERA_V1
from shared.protocol.ids import BadIdError, decode_run_id, tenant_of
from shared.services import stream_interest, webhook_secrets
from shared.services.common import Caller, page_limit

if TYPE_CHECKING:  # pydantic: only the routes that validate a body load it
    import threading

    from shared.protocol.webhook_bodies import RegisterWebhook, RotateWebhookSecret

MAX_SUBSCRIPTIONS_PER_TENANT = 50
MAX_DEAD_LETTER_PAGE = 100
VERIFY_TIMEOUT_S = 10.0
MAX_REPLY_BYTES = 64 * 1024
# A message carries its event inline up to this size; a larger event is read from the log at delivery.
MAX_INLINE_EVENT_BYTES = 200_000
SEAM = "webhook.fanout"


class DeliveryFailedError(Exception):
    """One attempt did not get a 2xx; ``status`` is the receiver's answer (None: no answer)."""

    def __init__(self, reason: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


@dataclass(frozen=True)
class Delivered:
    delivery_id: str
    status: int | None  # None: nothing sent (the subscription is gone)


# -- registration ---------------------------------------------------------------------------------------------------


def _decode_webhook_id(caller: Caller, wire: str) -> str:
    """The path rule of every webhook route: a malformed id is 400; another tenant's is 403 id_tenant_mismatch
    before any read (the tenant is part of the id); an unknown one of the caller's tenant is 404."""
    try:
        bound = decode_run_id(wire)  # same grammar: <tenant>/<16-128 id chars>
    except BadIdError as exc:
        raise invalid_parameter("webhookId", "The webhook id is malformed.") from exc
    if tenant_of(bound) != caller.tenant:
        raise IdTenantMismatchError()
    return bound


def _load(ports: Ports, caller: Caller, wire: str) -> dict[str, Any]:
    webhook_id = _decode_webhook_id(caller, wire)
    sub = ports.webhooks.get_subscription(caller.tenant, webhook_id)
    if sub is None:
        raise NotFoundError("No such webhook.")
    return sub


def _refusal(exc: EgressRefusedError) -> WebhookUrlRejectedError:
    # the guard words its reasons for tools; the address itself is never in them
    reason = exc.reason.replace("the tool's ", "its ")
    return WebhookUrlRejectedError(f"The webhook URL is refused: {reason}.")


def _check_url(ports: Ports, url: str) -> None:
    """webhooks.md §Egress at registration: https only, and no private, loopback, link-local, ULA or metadata
    destination. The operator's egress allowlist is the one exception (local mode allowlists loopback, where the
    receivers speak plain http)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username
        or parts.password
        or any(ch in url for ch in " \r\n\0")
    ):
        raise WebhookUrlRejectedError("The webhook URL must be an absolute https URL without credentials.")
    try:
        allowlisted = ports.http.check(url)
    except EgressRefusedError as exc:
        raise _refusal(exc) from exc
    except TransportError as exc:
        raise WebhookUrlRejectedError("The webhook URL is not a valid https URL.") from exc
    if parts.scheme != "https" and not allowlisted:
        raise WebhookUrlRejectedError("The webhook URL must use https.")


def _algorithms(body: RegisterWebhook) -> list[str]:
    algs = body.signatureAlgorithms
    if algs is None:
        return [wh.V1]
    faults = [fault(f"/signatureAlgorithms/{i}", "enum") for i, a in enumerate(algs) if a not in wh.ALGORITHMS]
    faults += [fault(f"/signatureAlgorithms/{i}", "uniqueItems") for i, a in enumerate(algs) if a in algs[:i]]
    if wh.V1 not in algs:
        faults.append(fault("/signatureAlgorithms", "contains", "The list must name v1."))
    if faults:
        raise invalid(
            "signatureAlgorithms must list v1, without repeats, and only algorithms this host "
            "advertises (v1, standard-webhooks-1).",
            faults,
        )
    return list(algs)


def _check_events(events: Sequence[str]) -> None:
    """webhooks.md: ``events[]`` are v2 event type names; an unknown one is refused by name (a subscription to a
    type that never fires would be accepted and silently deliver nothing)."""
    unknown = wh.unknown_event_types(events)
    if unknown:
        from shared.protocol.event_types import V2_EVENT_TYPES

        # by index: an entry outside the type-name grammar is named ``events[i]`` in ``unknown``, not by itself
        where = [
            fault(f"/events/{i}", "enum", "Not a v2 event type.")
            for i, e in enumerate(events)
            if e not in V2_EVENT_TYPES
        ]
        raise ValidationError(
            f"events[] names an unknown v2 event type: {', '.join(unknown)}.",
            {"field": "events", "unknownEventTypes": unknown, "errors": where[:MAX_FAULTS]},
        )
    repeats = [fault(f"/events/{i}", "uniqueItems") for i, e in enumerate(events) if e in events[:i]]
    if repeats:
        raise invalid("events must not repeat a type.", repeats)


def register(ports: Ports, caller: Caller, body: RegisterWebhook) -> dict[str, Any]:
    _check_events(body.events)
    algorithms = _algorithms(body)
    standard = wh.STANDARD_WEBHOOKS in algorithms
    if standard and (body.secret is None or wh.whsec_key(body.secret) is None):
        raise invalid_at(
            "/secret",
            "required" if body.secret is None else "format",
            "A standard-webhooks-1 subscription needs secret as whsec_<base64 of 24-64 bytes>.",
        )
    _check_url(ports, body.url)
    existing = ports.webhooks.list_subscriptions(caller.tenant)
    if len(existing) >= MAX_SUBSCRIPTIONS_PER_TENANT:
        raise invalid_at("", "quota", f"A tenant may hold at most {MAX_SUBSCRIPTIONS_PER_TENANT} webhooks.")
    if standard:
        assert body.secret is not None
        _verify_endpoint(ports, body.url, body.secret)
    generated = body.secret is None
    secret = (
        body.secret
        if body.secret is not None
        else "whsec_" + base64.b64encode(_random_bytes(ports, 32)).decode("ascii")
    )
    webhook_id = f"{caller.tenant}/{ports.ids.ulid()}"
    created_at = ports.clock.iso()
    sub = {
        "webhookId": webhook_id,
        "tenant": caller.tenant,
        "url": body.url,
        "events": list(body.events),
        "tags": list(body.tags or []),
        "signatureAlgorithms": algorithms,
        "createdAt": created_at,
        "createdBy": caller.subject_id,
    }
    webhook_secrets.store(ports, caller.tenant, webhook_id, secret)  # sealed, in the signing table
    ports.webhooks.put_subscription(caller.tenant, webhook_id, sub, if_absent=True)
    stream_interest.outlast(ports, [doc for _, doc in existing])  # a first subscription: the cached answers
    out: dict[str, Any] = {
        "webhookId": webhook_id,
        "subscriptionId": webhook_id,
        "url": body.url,
        "eventTypes": list(body.events),
        "createdAt": created_at,
    }
    if body.signatureAlgorithms is not None:
        out["signatureAlgorithms"] = algorithms
    if generated:
        out["secret"] = secret  # RFC 0221: a generated secret is returned once; a supplied one never
    return out


def _random_bytes(ports: Ports, n: int) -> bytes:
    token = ports.ids.token(n)
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))


def _verify_endpoint(ports: Ports, url: str, secret: str) -> None:
    """RFC 0201 §D: one signed challenge, no retry, no redirect, 10 s; anything but a 2xx echoing it refuses."""
    challenge = ports.ids.token(24)  # 192 bits, base64url
    raw = json.dumps({"type": wh.VERIFICATION_TYPE, "challenge": challenge}, separators=(",", ":")).encode()
    now = ports.clock.now_ms() // 1000
    message_id = "msg_" + hashlib.sha256(f"verify\n{challenge}".encode()).hexdigest()[:40]
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "openwop-serverless-webhooks/1",
        "webhook-id": message_id,
        "webhook-timestamp": str(now),
        "webhook-signature": wh.standard_signatures([secret], message_id, now, raw),
    }
    try:
        reply = ports.http.send("POST", url, headers, raw, timeout_s=VERIFY_TIMEOUT_S, max_bytes=MAX_REPLY_BYTES)
    except EgressRefusedError as exc:
        raise _refusal(exc) from exc
    except TransportError as exc:
        raise WebhookEndpointUnverifiedError("The webhook endpoint did not answer the verification request.") from exc
    echoed = None
    if 200 <= reply.status < 300:
        try:
            doc = json.loads(reply.body)
            echoed = doc.get("challenge") if isinstance(doc, dict) else None
        except ValueError:
            echoed = None
    if echoed != challenge:
        raise WebhookEndpointUnverifiedError()


def unregister(ports: Ports, caller: Caller, wire: str) -> None:
    webhook_id = _decode_webhook_id(caller, wire)
    if not ports.webhooks.delete_subscription(caller.tenant, webhook_id):
        raise NotFoundError("No such webhook.")
    webhook_secrets.delete(ports, caller.tenant, webhook_id)


def rotate_secret(ports: Ports, caller: Caller, wire: str, body: RotateWebhookSecret) -> dict[str, Any]:
    """RFC 0201 §E: the new secret signs at once; the previous one keeps signing for the overlap, and a rotation
    inside an overlap retires the oldest secret immediately (at most two entries)."""
    sub = _load(ports, caller, wire)
    if wh.STANDARD_WEBHOOKS not in sub.get("signatureAlgorithms", []):
        raise invalid(
            "Only a subscription that opted into standard-webhooks-1 can rotate its secret.",
            [fault("", "state", "This subscription did not opt into standard-webhooks-1.", parameter="webhookId")],
        )
    if wh.whsec_key(body.secret) is None:
        raise invalid_at("/secret", "format", "secret must be whsec_<base64 of 24-64 bytes>.")
    now_ms = ports.clock.now_ms()
    expires_ms = now_ms + int(ports.settings.webhook_rotation_overlap_s) * 1000
    if not webhook_secrets.rotate(ports, sub, body.secret, expires_ms):
        raise NotFoundError("No such webhook.")  # unregistered or rotated concurrently: nothing was changed
    return {"rotatedAt": ports.clock.iso(now_ms), "previousSecretExpiresAt": ports.clock.iso(expires_ms)}


_LIST_CURSOR_KEY = frozenset({"webhookId"})


def _listed(doc: dict[str, Any]) -> dict[str, Any]:
    """One subscription as listed: the registration's answer (its member names: ``subscriptionId``,
    ``eventTypes``) without the secret, plus the request's own names (``events``, ``tags``) and the schemes applied."""
    return {
        "webhookId": doc["webhookId"],
        "subscriptionId": doc["webhookId"],
        "url": doc["url"],
        "events": list(doc["events"]),
        "eventTypes": list(doc["events"]),
        "tags": list(doc.get("tags") or []),
        "signatureAlgorithms": list(doc.get("signatureAlgorithms") or [wh.V1]),
        "createdAt": doc["createdAt"],
    }


def list_webhooks(ports: Ports, caller: Caller, params: dict[str, str]) -> dict[str, Any]:
    """``GET /webhooks``: the caller's tenant's subscriptions, oldest first (ids are ULIDs), ``limit`` a page
    (default and most: the tenant's cap), ``nextCursor`` while more remain (the runs list's MAC'd cursor). Each entry
    is what the registration set, never a secret: id, url, events, tags, the signing schemes applied (``v1``
    always) and when it was created. One Query of the tenant's own partition: no other tenant's item is read."""
    from shared.services.cursors import mint_cursor, page_start

    limit = page_limit(params, MAX_SUBSCRIPTIONS_PER_TENANT, MAX_SUBSCRIPTIONS_PER_TENANT)
    start = page_start(ports, caller.tenant, params, _LIST_CURSOR_KEY)
    after = start["webhookId"] if start else ""
    rows = sorted((sk, doc) for sk, doc in ports.webhooks.list_subscriptions(caller.tenant) if sk > after)
    page = rows[:limit]
    out: dict[str, Any] = {"webhooks": [_listed(doc) for _, doc in page]}
    if len(rows) > limit:
        out["nextCursor"] = mint_cursor(ports, caller.tenant, {"webhookId": page[-1][0]})
    return out


def dead_letters(ports: Ports, caller: Caller, wire: str, params: dict[str, str]) -> dict[str, Any]:
    """RFC 0188: newest first, content-free records; ``cursor`` is the last record's sort key (opaque)."""
    sub = _load(ports, caller, wire)
    limit = page_limit(params, 50, MAX_DEAD_LETTER_PAGE)
    before = None
    if params.get("cursor"):
        try:
            before = base64.urlsafe_b64decode(params["cursor"] + "=" * (-len(params["cursor"]) % 4)).decode()
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValidationError("cursor is malformed.") from exc
    rows = sorted(ports.webhooks.list_dead_letters(sub["webhookId"]), key=lambda r: r[0], reverse=True)
    now_s = ports.clock.now_ms() // 1000
    rows = [
        (sk, doc)
        for sk, doc in rows
        if int(doc.get("expiresAtEpoch", now_s + 1)) > now_s and (before is None or sk < before)
    ]
    page = rows[:limit]
    out: dict[str, Any] = {"deliveries": [{k: v for k, v in doc.items() if k != "expiresAtEpoch"} for _, doc in page]}
    if len(rows) > limit:
        out["nextCursor"] = base64.urlsafe_b64encode(page[-1][0].encode()).decode().rstrip("=")
    return out


# -- fan-out --------------------------------------------------------------------------------------------------------


def _fixed_history_below(data: dict[str, Any]) -> int | None:
    """replay.md fan-out rule, read from the run's creation facts (never from the event type): a ``replay`` fork
    re-emits fixed history only, so nothing of it is delivered (None); a ``branch`` fork's copied prefix [0, fromSeq)
    is not delivered, its own events are. An era-2 log (seeded as a v1 host wrote it) is not delivered either."""
    if data.get("eventLogSchemaVersion") == ERA_V1:
        return None  # a log seeded as a v1 host wrote it (the seams profile) is history, never news to deliver
    fork = data.get("fork")
    if not fork:
        return 0
    if str(fork.get("mode")) == "replay":
        return None
    return int(fork.get("fromSeq", 0))


def _matches(sub: dict[str, Any], event_type: str, run_tags: Iterable[str]) -> bool:
    if event_type not in sub.get("events", []):
        return False
    tags = sub.get("tags") or []
    return not tags or bool(set(tags) & set(run_tags))


# Per warm fan-out process: a run's fork rule and tags are creation facts (immutable), so a run's later stream
# batches need no GetItem. Bounded; an evicted run is read again.
_RUN_FACTS_MAX = 2048
_RUN_FACTS: LockedLRUCache[str, tuple[int | None, tuple[str, ...]]] = LockedLRUCache(maxsize=_RUN_FACTS_MAX)


def _load_run_facts(ports: Ports, run_ids: Sequence[str]) -> None:
    """Cache the fork rule and tags of the runs not cached yet: their creation facts items only, one eventually
    consistent BatchGetItem per 100 runs (0.5 RRU a run under 4 KB, where its run and facts items read strongly
    consistent were 2), a run it does not show yet read again strongly consistent."""
    missing = [r for r in run_ids if r not in _RUN_FACTS]
    if not missing:
        return
    for run_id, data in ports.runs.get_facts(missing).items():
        _RUN_FACTS[run_id] = (_fixed_history_below(data), tuple(data.get("tags") or ()))


def _run_facts(run_id: str) -> tuple[int | None, tuple[str, ...]] | None:
    return _RUN_FACTS.get(run_id)


def fan_out(
    ports: Ports,
    stored: Sequence[tuple[str, int, dict[str, Any] | None]],
    interests: dict[str, stream_interest.Interest] | None = None,
) -> int:
    """Queue one delivery per (matching subscription, stored event). ``stored`` is (runId, sequence, event or
    None when it must be read from the log), in log order; ``interests``: what the batch's tenants subscribe to
    (``stream_interest.read``), filled in here with each tenant read (so the caller's other uses of the batch, the
    sampling rules, need no read of their own). Returns the number of messages queued.

    Requests: at most one eventually consistent Query of the tenant's subscriptions per tenant and batch (none
    while the warm process keeps its answer, ``stream_interest``, unless a run of the tenant is new to this process:
    then its kept subscriptions are read again), and for the runs of tenants that have any, one
    BatchGetItem of the runs
    not seen yet by this warm process (per 100), sent while the Query is (unless this process found the tenant
    without subscribers before), then one SendMessageBatch per ten messages; events come from the stream records
    themselves."""
    by_run: dict[str, list[tuple[int, dict[str, Any] | None]]] = defaultdict(list)
    for run_id, seq, event in stored:
        by_run[run_id].append((seq, event))
    unseen = {tenant_of(r) for r in by_run if r not in _RUN_FACTS}  # a run's first batch here: its tenant read afresh
    reading = _read_facts_ahead(ports, by_run)
    interests = {} if interests is None else interests
    for tenant in dict.fromkeys(tenant_of(run_id) for run_id in by_run):
        if tenant not in interests:
            interests[tenant] = stream_interest.read(ports, tenant, fresh=tenant in unseen)
    subs_of = {tenant: interest.subscriptions for tenant, interest in interests.items()}
    if reading is not None:
        reading.join()
    _load_run_facts(ports, [r for r in by_run if subs_of[tenant_of(r)]])  # any not read ahead
    messages: list[QueueMessage] = []
    for run_id, items in by_run.items():
        messages += _run_messages(ports, run_id, items, subs_of[tenant_of(run_id)])
    if messages:
        ports.queues["webhooks"].send_batch(messages)
    return len(messages)


def _read_facts_ahead(ports: Ports, by_run: dict[str, Any]) -> threading.Thread | None:
    """Start reading the facts of the runs new to this process (whose tenant may have subscribers) beside the
    tenants' subscriptions, not after them; None when there are none."""
    ahead = [r for r in by_run if r not in _RUN_FACTS and not stream_interest.known_without_subscribers(tenant_of(r))]
    if not ahead:
        return None
    import contextvars
    import threading

    # in a copy of this context, as ``common.parallel``'s threads: its trace span and log keys, and its requests
    # are the caller's (what a meter counts per thread)
    reading = threading.Thread(
        target=contextvars.copy_context().run,
        args=(_load_run_facts, ports, ahead),
        daemon=True,
        name=threading.current_thread().name + "-facts",
    )
    reading.start()
    return reading


def _run_messages(
    ports: Ports, run_id: str, items: list[tuple[int, dict[str, Any] | None]], subs: list[dict[str, Any]]
) -> list[QueueMessage]:
    """One run's messages: each delivered event (above its fixed history) to each subscription it matches."""
    if not subs:
        return []
    facts = _run_facts(run_id)
    if facts is None:
        return []
    floor, run_tags = facts
    if floor is None:
        return []
    items = sorted(i for i in items if i[0] >= floor) if floor else sorted(items, key=lambda i: i[0])
    messages: list[QueueMessage] = []
    for seq, event in items:
        if event is None:
            found = ports.events.read_events(run_id, seq - 1, limit=1)
            event = found[0] if found and int(found[0]["sequence"]) == seq else None
        if event is None:
            continue
        messages += [
            _message(sub["webhookId"], run_id, event) for sub in subs if _matches(sub, str(event["type"]), run_tags)
        ]
    return messages


def _message(webhook_id: str, run_id: str, event: dict[str, Any]) -> QueueMessage:
    seq = int(event["sequence"])
    did = wh.delivery_id(webhook_id, run_id, seq)
    body: dict[str, Any] = {
        "webhookId": webhook_id,
        "runId": run_id,
        "sequence": seq,
        "deliveryId": did,
        "eventId": event.get("eventId"),
        "eventType": event["type"],
    }
    inline = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    if len(inline.encode("utf-8")) <= MAX_INLINE_EVENT_BYTES:
        body["event"] = event
    group = hashlib.sha256(f"{webhook_id}\n{run_id}".encode()).hexdigest()
    return QueueMessage(json.dumps(body, separators=(",", ":"), ensure_ascii=False), group, did)


# -- delivery -------------------------------------------------------------------------------------------------------


def retry_delay_s(ports: Ports, attempt: int) -> int:
    """Exponential backoff before attempt ``attempt + 1``: base * 2^(attempt-1), capped (deployed: 30 s doubling to
    15 min, 8 attempts over ~45 min). Local mode keeps that shape and divides each delay by
    ``WEBHOOK_RETRY_DIVISOR`` (rounded up to whole seconds, the queue's unit): 30 gives 1, 2, 4, 8, 16, 30, 30 s."""
    s = ports.settings
    delay = int(min(int(s.webhook_retry_cap_s), int(s.webhook_retry_base_s) * (2 ** max(0, attempt - 1))))
    return -(-delay // max(1, int(s.webhook_retry_divisor)))


def deliver(ports: Ports, message: dict[str, Any], attempt: int) -> Delivered:
    """One attempt of one delivery. A subscription that is gone (unregistered) gets nothing, nor does a run that
    is gone (erased, or expired): the message is acknowledged without a request, so nothing of an erased run leaves
    after its erasure answered, whether the message waited in the queue, for a retry, or in the dead-letter queue
    until a redrive. The subscription and the run's item are one read. A non-2xx answer (3xx included: redirects
    are never followed), a refused destination or no answer raises DeliveryFailedError; when ``attempt`` is the
    last one, the dead-letter record is written first."""
    webhook_id = str(message["webhookId"])
    run_id = str(message["runId"])
    did = str(message["deliveryId"])
    if tenant_of(run_id) != tenant_of(webhook_id):
        return Delivered(did, None)
    sub, run_expires = ports.webhooks.get_subscription_and_run(tenant_of(webhook_id), webhook_id, run_id)
    if sub is None or tenant_of(run_id) != sub["tenant"]:
        return Delivered(did, None)
    if run_expires is None or 0 < run_expires <= ports.clock.now_ms() // 1000:
        return Delivered(did, None)  # the run is erased (its tombstone came first) or expired: nothing of it goes
    event = message.get("event")
    if event is None:
        found = ports.events.read_events(run_id, int(message["sequence"]) - 1, limit=1)
        if not found:
            return Delivered(did, None)  # erased meanwhile: nothing left to deliver
        event = found[0]
    raw = json.dumps({"runId": run_id, "event": event}, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    now_ms = ports.clock.now_ms()
    secrets = webhook_secrets.signing_secrets(ports, sub, now_ms)
    if secrets is None:
        return Delivered(did, None)  # unregistered while this message waited (its secret went with it)
    current, previous = secrets
    standard: list[str] = []
    if wh.STANDARD_WEBHOOKS in sub.get("signatureAlgorithms", []):
        standard = [current, previous] if previous else [current]
    headers = wh.delivery_headers(
        webhook_id=webhook_id,
        event_type=str(event["type"]),
        timestamp=now_ms // 1000,
        raw_body=raw,
        v1_secret=previous or current,
        standard=standard,
        message_id=did,
    )
    status, reason = _post(ports, sub["url"], headers, raw)
    if reason is None:
        return Delivered(did, status)
    if attempt >= int(ports.settings.webhook_max_attempts):
        _dead_letter(ports, message, sub, attempt, status)
    raise DeliveryFailedError(reason, status)


def _post(ports: Ports, url: str, headers: dict[str, str], raw: bytes) -> tuple[int | None, str | None]:
    """POST the delivery: the receiver's status (None: no answer) and why it failed (None: a 2xx)."""
    try:
        reply = ports.http.send(
            "POST", url, headers, raw, timeout_s=float(ports.settings.webhook_timeout_s), max_bytes=MAX_REPLY_BYTES
        )
    except EgressRefusedError as exc:
        return None, exc.reason
    except TransportError as exc:
        return None, exc.reason
    if 200 <= reply.status < 300:
        return reply.status, None
    return reply.status, f"the receiver answered {reply.status}"


def _dead_letter(ports: Ports, message: dict[str, Any], sub: dict[str, Any], attempts: int, status: int | None) -> None:
    now_ms = ports.clock.now_ms()
    expires_s = now_ms // 1000 + int(ports.settings.webhook_dead_letter_days) * 86_400
    record: dict[str, Any] = {
        "deliveryId": str(message["deliveryId"]),
        "webhookId": sub["webhookId"],
        "runId": str(message["runId"]),
        "eventId": str(message.get("eventId") or ""),
        "eventType": str(message["eventType"]),
        "attempts": attempts,
        "deadLetteredAt": ports.clock.iso(now_ms),
        "expiresAt": ports.clock.iso(expires_s * 1000),
        "reason": "retries_exhausted",
        "expiresAtEpoch": expires_s,
    }
    if status is not None:
        record["lastStatus"] = status
    pk, sk = ports.webhooks.put_dead_letter(sub["webhookId"], record, expires_at=expires_s)
    from shared.services.erasure import link_host_item

    link_host_item(ports, record["runId"], pk, sk, expires_s)  # the run's erasure reaches it
