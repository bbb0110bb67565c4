"""Interrupts (interrupt.md): resolve an approval by run, and the signed-token surface.

A run suspended on an approval gate is ``waiting-approval`` and its execution waits in ``Park`` on a task token
(no Lambda). A resolve appends ``interrupt.resolved`` and moves the run back to ``running`` in one conditional
write (exactly one of two racing resolves wins), then wakes the execution (``lifecycle.wake``).

Resume tokens are ``ow2.hs256.<kid>.<payload>.<mac>``: the payload is base64url JSON naming the run, node,
interrupt, the minting subject and ``expiresAt``; the MAC is HMAC-SHA-256 under a key derived from the host's
HMAC secret. A token is minted by an eligible approver (a host route), so resolving with it records that
approver; it dies with its interrupt (resolution, cancellation, completion: ``409``) or at ``expiresAt``
(``410``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from typing import Any

from shared.errors import (
    ConflictError,
    ForbiddenError,
    InterruptAlreadyResolvedError,
    InterruptExpiredError,
    InterruptTokenInvalidError,
    NotFoundError,
    ServiceUnavailableError,
    ValidationError,
)
from shared.ports import Ports, RunRecord
from shared.protocol import codes as c
from shared.protocol.ids import is_run_id
from shared.services import lifecycle
from shared.services.common import Caller, load_own_run

TOKEN_ALG = "hs256"
TOKEN_KID = "h1"  # the one key this host holds: derived from its HMAC secret
TOKEN_TTL_S = 1800  # interrupt.md: the default SHOULD be 30 minutes
MAX_TOKEN_CHARS = 2048
_B64URL_RE = re.compile(r"^[A-Za-z0-9_-]+$")
_KEY_ID_RE = re.compile(r"^[A-Za-z0-9._~-]{1,128}$")
_NODE_ID_RE = re.compile(r"^[A-Za-z0-9._~:-]{1,128}$")
_ATTEMPTS = 10


# --------------------------------------------------------------------------- resolve


def _pending(state: dict[str, Any], node_id: str) -> dict[str, Any] | None:
    active = state.get("active") or {}
    intr = active.get("interrupt")
    if active.get("nodeId") != node_id or not intr or intr.get("resolved") is not None:
        return None
    return dict(intr)


def _check_value(pending: dict[str, Any], value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValidationError("resumeValue must be an object.")
    actions = (pending.get("data") or {}).get("actions") or []
    if value.get("action") not in actions:
        raise ValidationError("resumeValue.action is not one of the interrupt's actions.", {"actions": actions})
    return value


def _eligible(pending: dict[str, Any], subject_id: str) -> None:
    approvers = (pending.get("data") or {}).get("approversList")
    if approvers and subject_id not in approvers:
        raise ForbiddenError("The caller is not among this approval's approvers.")


def resolve(
    ports: Ports, rec: RunRecord, node_id: str, value: Any, resolver: Caller, interrupt_id: str | None = None
) -> dict[str, Any]:
    """Record the decision and wake the run; the loser of a race (or a late resolve) is ``409``."""
    from shared.engine import kernel

    for _ in range(_ATTEMPTS):
        if rec.terminal:
            raise InterruptAlreadyResolvedError()
        state = kernel.load_state(ports, rec)
        pending = _pending(state, node_id)
        if pending is None or (interrupt_id is not None and pending.get("interruptId") != interrupt_id):
            if interrupt_id is not None or (state.get("nodes") or {}).get(node_id, {}).get("resolutions"):
                raise InterruptAlreadyResolvedError()
            raise NotFoundError("No interrupt is pending at this node.")
        resume_value = dict(_check_value(pending, value))
        _eligible(pending, resolver.subject_id)
        resume_value.setdefault("decidedAt", ports.clock.iso())
        resume_value.setdefault("decidedBy", resolver.subject_id)
        action = resume_value["action"]
        payload = {
            "nodeId": node_id,
            "interruptId": pending.get("interruptId"),
            "kind": pending.get("kind"),
            "resumeValue": resume_value,
            "resolvedBy": resolver.subject,
            "decision": "rejected" if action == "reject" else "granted",
            "action": action,
        }
        try:
            lifecycle.transition(
                ports, rec, c.INTERRUPT_RESOLVED, payload, "running", ("waiting-approval",), node_id=node_id
            )
        except ConflictError:
            fresh = ports.runs.get_run(rec.run_id)
            if fresh is None:
                raise NotFoundError("No such run.") from None
            rec = fresh
            continue
        lifecycle.wake(ports, rec.run_id)
        return {"runId": rec.run_id, "nodeId": node_id, "interruptId": payload["interruptId"], "status": "running"}
    raise ServiceUnavailableError()


def _node_id(node_id: str) -> str:
    if not _NODE_ID_RE.match(node_id):
        raise ValidationError("The node id is malformed.")
    return node_id


def resolve_by_run(ports: Ports, caller: Caller, wire_run_id: str, node_id: str, value: Any) -> dict[str, Any]:
    rec = load_own_run(ports, caller, wire_run_id)
    return resolve(ports, rec, _node_id(node_id), value, caller)


# --------------------------------------------------------------------------- tokens


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _key(ports: Ports, kid: str) -> bytes | None:
    if kid != TOKEN_KID:
        return None
    secret = ports.secrets.get_secret(ports.settings.cursor_secret_id).encode("utf-8")
    return hmac.new(secret, b"openwop-serverless interrupt resume tokens v1", hashlib.sha256).digest()


def _mac(key: bytes, head: str) -> str:
    return _b64(hmac.new(key, head.encode("ascii"), hashlib.sha256).digest())


def mint_token(ports: Ports, caller: Caller, wire_run_id: str, node_id: str) -> dict[str, Any]:
    """A resume token for the interrupt pending at ``node_id``, for an approver to hand on (a mail link)."""
    from shared.engine import kernel

    rec = load_own_run(ports, caller, wire_run_id)
    node_id = _node_id(node_id)
    if rec.terminal:
        raise InterruptAlreadyResolvedError()
    pending = _pending(kernel.load_state(ports, rec), node_id)
    if pending is None:
        raise NotFoundError("No interrupt is pending at this node.")
    _eligible(pending, caller.subject_id)
    expires = ports.clock.now_ms() // 1000 + TOKEN_TTL_S
    body = {
        "r": rec.run_id,
        "n": node_id,
        "i": pending.get("interruptId"),
        "s": caller.subject_id,
        "x": expires,
        "t": "resolve",
    }
    head = f"ow2.{TOKEN_ALG}.{TOKEN_KID}.{_b64(json.dumps(body, separators=(',', ':'), sort_keys=True).encode())}"
    key = _key(ports, TOKEN_KID)
    assert key is not None
    return {"token": f"{head}.{_mac(key, head)}", "expiresAt": ports.clock.iso(expires * 1000)}


def read_token(ports: Ports, token: str) -> dict[str, Any]:
    """Verify a token: grammar, advertised alg, held kid, constant-time MAC, then expiry (410)."""
    invalid = InterruptTokenInvalidError()
    parts = token.split(".") if len(token) <= MAX_TOKEN_CHARS else []
    if len(parts) != 5 or parts[0] != "ow2" or parts[1] != TOKEN_ALG or not _KEY_ID_RE.match(parts[2]):
        raise invalid
    key = _key(ports, parts[2])
    if key is None or not _B64URL_RE.match(parts[3]) or not _B64URL_RE.match(parts[4]):
        raise invalid
    if not hmac.compare_digest(parts[4].encode(), _mac(key, ".".join(parts[:4])).encode()):
        raise invalid
    try:
        body = json.loads(base64.urlsafe_b64decode(parts[3] + "=" * (-len(parts[3]) % 4)))
    except (ValueError, binascii.Error):
        raise invalid from None
    if (
        not isinstance(body, dict)
        or not is_run_id(body.get("r"))
        or not isinstance(body.get("n"), str)
        or not isinstance(body.get("i"), str)
        or not isinstance(body.get("s"), str)
        or not isinstance(body.get("x"), int)
        or body.get("t") != "resolve"
    ):
        raise invalid
    if ports.clock.now_ms() // 1000 >= body["x"]:
        raise InterruptExpiredError()
    return body


def _token_run(ports: Ports, body: dict[str, Any]) -> RunRecord:
    rec = ports.runs.get_run(str(body["r"]))
    if rec is None:
        raise NotFoundError("No such run.")
    return rec


def inspect_by_token(ports: Ports, token: str) -> dict[str, Any]:
    from shared.engine import kernel

    body = read_token(ports, token)
    rec = _token_run(ports, body)
    pending = None if rec.terminal else _pending(kernel.load_state(ports, rec), str(body["n"]))
    if pending is None or pending.get("interruptId") != body["i"]:
        raise InterruptAlreadyResolvedError()
    return {"kind": pending.get("kind"), "key": pending.get("key"), "data": pending.get("data")}


def resolve_by_token(ports: Ports, token: str, value: Any) -> dict[str, Any]:
    body = read_token(ports, token)
    rec = _token_run(ports, body)
    return resolve(ports, rec, str(body["n"]), value, Caller(rec.tenant, str(body["s"])), str(body["i"]))
