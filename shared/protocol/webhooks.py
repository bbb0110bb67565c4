"""The two signature schemes of a delivery (webhooks.md, RFC 0201).

``v1`` (every delivery): ``OpenWOP-Signature: sha256=<hex HMAC-SHA256(secret, "{timestamp}.{rawBody}")>``, keyed by
the secret string as issued. ``standard-webhooks-1`` (opted-in subscriptions only): ``webhook-signature`` entries
``v1,<base64>`` over ``{webhook-id}.{webhook-timestamp}.{rawBody}``, keyed by the base64-decoded ``whsec_`` secret,
computed by the ``standardwebhooks`` library. Pure: no I/O. The registration bodies are
``shared.protocol.webhook_bodies`` (pydantic: loaded only by the routes that validate them).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
import hmac
import re
from collections.abc import Sequence

V1 = "v1"
STANDARD_WEBHOOKS = "standard-webhooks-1"
ALGORITHMS = (V1, STANDARD_WEBHOOKS)
EVENT_TYPE_RE = re.compile(r"^[a-z][a-z0-9-]*(\.[a-z0-9][a-z0-9-]*)+$")
MAX_EVENT_TYPE_CHARS = 128
TAG_RE = re.compile(r"^[A-Za-z0-9._:/-]{1,64}$")
VERIFICATION_TYPE = "openwop.webhook.verification"
MAX_SECRET_CHARS = 200


def unknown_event_types(events: Sequence[str]) -> list[str]:
    """The entries of a subscription's ``events[]`` that are not registered v2 event type names (events.md §2),
    in order; an entry outside the type-name grammar is named by its index (``events[3]``), never echoed."""
    from shared.protocol.event_types import V2_EVENT_TYPES

    return [e if EVENT_TYPE_RE.match(e) else f"events[{i}]" for i, e in enumerate(events) if e not in V2_EVENT_TYPES]


def whsec_key(secret: str) -> bytes | None:
    """The key bytes of a ``whsec_<base64>`` secret (24-64 bytes), or None when it is not of that form."""
    if not secret.startswith("whsec_"):
        return None
    try:
        key = base64.b64decode(secret[len("whsec_") :], validate=True)
    except (binascii.Error, ValueError):
        return None
    return key if 24 <= len(key) <= 64 else None


def delivery_id(webhook_id: str, run_id: str, sequence: int) -> str:
    """The ``webhook-id`` of one delivery: the same on every attempt of (webhookId, runId, sequence), different
    across them, derived from nothing secret."""
    digest = hashlib.sha256(f"{webhook_id}\n{run_id}\n{sequence}".encode()).hexdigest()
    return f"msg_{digest[:40]}"


def v1_signature(secret: str, timestamp: int, raw_body: bytes) -> str:
    mac = hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode() + raw_body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def standard_signatures(secrets: Sequence[str], message_id: str, timestamp: int, raw_body: bytes) -> str:
    """``webhook-signature``: one ``v1,<base64>`` entry per secret, space-separated (Standard Webhooks 1.0.0)."""
    from standardwebhooks.webhooks import Webhook  # lazy: only deliveries to opted-in subscriptions need it

    at = datetime.datetime.fromtimestamp(timestamp, tz=datetime.UTC)
    text = raw_body.decode("utf-8")
    return " ".join(Webhook(s).sign(message_id, at, text) for s in secrets)


def delivery_headers(
    *,
    webhook_id: str,
    event_type: str,
    timestamp: int,
    raw_body: bytes,
    v1_secret: str,
    standard: Sequence[str] = (),
    message_id: str = "",
) -> dict[str, str]:
    """Every header of one delivery: the five ``OpenWOP-*`` headers (scheme v1) and, for an opted-in
    subscription (``standard`` non-empty), ``webhook-id`` / ``webhook-timestamp`` / ``webhook-signature``."""
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "openwop-serverless-webhooks/1",
        "OpenWOP-Webhook-Id": webhook_id,
        "OpenWOP-Event-Type": event_type,
        "OpenWOP-Timestamp": str(timestamp),
        "OpenWOP-Signature": v1_signature(v1_secret, timestamp, raw_body),
        "OpenWOP-Signature-Algorithm": V1,
    }
    if standard:
        headers["webhook-id"] = message_id
        headers["webhook-timestamp"] = str(timestamp)
        headers["webhook-signature"] = standard_signatures(standard, message_id, timestamp, raw_body)
    return headers
