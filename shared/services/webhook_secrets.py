"""Where a webhook subscription's signing secrets live and how they are read (webhooks.md §Signing, RFC 0201 §E).

Not in the subscription: in the signing table (``Ports.signing``, pk ``WEBHOOK#<tenant>``, sk the webhookId), which
only the registration and delivery functions are granted, and there sealed with the signing key (``Ports.cipher``,
KMS) under the encryption context ``{"webhookId": <id>}``, so a sealed value opens only for the subscription it was
sealed for. Registration seals (it never opens one); delivery opens. The item: ``secret`` (sealed, base64) and, for
the rotation overlap, ``previous`` with ``previousExpiresAtMs``.

A subscription stored before this (its secret in cleartext in the host table) keeps signing with that secret: the
first delivery or rotation for it seals the secret(s) into the signing table and then removes them from the
subscription item (``migrate``), each step conditional, so a race leaves one copy and never none.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from shared import manifest
from shared.caches import LockedLRUCache
from shared.ports import Ports

_CLEAR = ("secret", "previousSecret", "previousExpiresAtMs")
# Per warm process: opened secrets by the digest of their sealed form (a rotation seals anew, so an entry never goes
# stale); one KMS Decrypt per secret and container. Bounded; an evicted one is opened again.
_OPENED_MAX = 512
_OPENED: LockedLRUCache[str, str] = LockedLRUCache(maxsize=_OPENED_MAX)


def _context(webhook_id: str) -> dict[str, str]:
    return {"webhookId": webhook_id}


def seal(ports: Ports, webhook_id: str, secret: str) -> str:
    blob = ports.cipher.encrypt(manifest.SIGNING, secret.encode("utf-8"), _context(webhook_id))
    return base64.b64encode(blob).decode("ascii")


def _open(ports: Ports, webhook_id: str, sealed: str) -> str:
    digest = hashlib.sha256(f"{webhook_id}\n{sealed}".encode()).hexdigest()
    found = _OPENED.get(digest)
    if found is not None:
        return found
    plain = ports.cipher.decrypt(manifest.SIGNING, base64.b64decode(sealed), _context(webhook_id)).decode("utf-8")
    _OPENED[digest] = plain
    return plain


def seal_answer(ports: Ports, answer: dict[str, Any]) -> dict[str, Any]:
    """A registration's answer as its idempotency record keeps it: a generated ``secret`` sealed under the replay
    context (the registration function may open only those), so the record, readable by every function that honours
    ``Idempotency-Key``, never holds a secret in the clear."""
    if "secret" not in answer:
        return answer
    name, value = manifest.REPLAY_CONTEXT
    blob = ports.cipher.encrypt(
        manifest.SIGNING, str(answer["secret"]).encode("utf-8"), {**_context(str(answer["webhookId"])), name: value}
    )
    return {**{k: v for k, v in answer.items() if k != "secret"}, "sealedSecret": base64.b64encode(blob).decode()}


def open_answer(ports: Ports, answer: dict[str, Any]) -> dict[str, Any]:
    """The answer ``seal_answer`` kept, as the caller gets it (the first time and on a replay alike)."""
    if "sealedSecret" not in answer:
        return answer
    name, value = manifest.REPLAY_CONTEXT
    plain = ports.cipher.decrypt(
        manifest.SIGNING,
        base64.b64decode(str(answer["sealedSecret"])),
        {**_context(str(answer["webhookId"])), name: value},
    ).decode("utf-8")
    return {**{k: v for k, v in answer.items() if k != "sealedSecret"}, "secret": plain}


def store(ports: Ports, tenant: str, webhook_id: str, secret: str) -> None:
    """A new subscription's secret (written before the subscription: a subscription never exists without it)."""
    ports.webhook_secrets.put_secret(tenant, webhook_id, {"secret": seal(ports, webhook_id, secret)}, if_absent=True)


def delete(ports: Ports, tenant: str, webhook_id: str) -> None:
    ports.webhook_secrets.delete_secret(tenant, webhook_id)


def migrate(ports: Ports, sub: dict[str, Any]) -> dict[str, Any] | None:
    """The sealed record of ``sub``: the stored one, or (a subscription of before the signing table) its cleartext
    secrets sealed into a new one, then taken out of the subscription item. None when it has neither."""
    tenant, webhook_id = str(sub["tenant"]), str(sub["webhookId"])
    stored = ports.webhook_secrets.get_secret(tenant, webhook_id)
    if stored is not None or "secret" not in sub:
        return stored
    record: dict[str, Any] = {"secret": seal(ports, webhook_id, str(sub["secret"]))}
    if sub.get("previousSecret"):
        record["previous"] = seal(ports, webhook_id, str(sub["previousSecret"]))
        record["previousExpiresAtMs"] = int(sub.get("previousExpiresAtMs", 0))
    if not ports.webhook_secrets.put_secret(tenant, webhook_id, record, if_absent=True):
        return ports.webhook_secrets.get_secret(tenant, webhook_id)  # another delivery migrated it first
    # only now is the cleartext removed, and only from the subscription as read (a concurrent change keeps it)
    ports.webhooks.put_subscription(
        tenant, webhook_id, {k: v for k, v in sub.items() if k not in _CLEAR}, if_equals=sub
    )
    return record


def signing_secrets(ports: Ports, sub: dict[str, Any], now_ms: int) -> tuple[str, str | None] | None:
    """(current, previous while its overlap lasts) of ``sub``; None when it has no secret (nothing is signed)."""
    record = migrate(ports, sub)
    if record is None:
        return None
    webhook_id = sub["webhookId"]
    previous = record.get("previous") if int(record.get("previousExpiresAtMs", 0)) > now_ms else None
    return _open(ports, webhook_id, record["secret"]), (_open(ports, webhook_id, previous) if previous else None)


def rotate(ports: Ports, sub: dict[str, Any], secret: str, previous_expires_ms: int) -> bool:
    """Seal ``secret`` as the current one; the current becomes the previous until ``previous_expires_ms`` (the
    sealed value moves as it is: registration never opens a secret). False when the subscription's record changed
    or went meanwhile (rotated or unregistered concurrently): nothing was written."""
    record = migrate(ports, sub)
    if record is None:
        return False
    updated = {
        "secret": seal(ports, sub["webhookId"], secret),
        "previous": record["secret"],
        "previousExpiresAtMs": previous_expires_ms,
    }
    return ports.webhook_secrets.put_secret(sub["tenant"], sub["webhookId"], updated, if_equals=record)
