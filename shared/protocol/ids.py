"""Identifier grammars and the RFC 0184 one-segment path projection of tenant-bound ids."""

from __future__ import annotations

import re

RUN_ID_RE = re.compile(r"^(anon:)?[A-Za-z0-9._~-]{1,128}/[A-Za-z0-9._~-]{16,128}$")
TENANT_RE = re.compile(r"^(anon:)?[A-Za-z0-9._~-]{1,128}$")
EVENT_ID_RE = re.compile(r"^[A-Za-z0-9._~-]{16,128}$")
NAME_ID_RE = re.compile(r"^[A-Za-z0-9._~:-]{1,128}$")  # workflowId, nodeId, agentId
IDEMPOTENCY_KEY_RE = re.compile(r"^[A-Za-z0-9._~-]{22,128}$")

_PASSTHROUGH = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_HEX = frozenset("0123456789abcdefABCDEF")


class BadIdError(ValueError):
    """A path id that does not decode or does not match the grammar."""


def project_id(bound: str) -> str:
    """``acme/r-1`` -> ``acme~2Fr-1``: every byte outside ``[A-Za-z0-9._-]`` becomes ``~XX``."""
    return "".join(chr(b) if b in _PASSTHROUGH else f"~{b:02X}" for b in bound.encode("utf-8"))


def unproject_id(wire: str) -> str:
    """Decode the projected (``~2F``) and the percent-encoded (``%2F``) forms.

    A ``~`` or ``%`` not followed by two hex digits is refused (``BadIdError``).
    """
    out = bytearray()
    i = 0
    n = len(wire)
    while i < n:
        ch = wire[i]
        if ch in "~%":
            pair = wire[i + 1 : i + 3]
            if len(pair) != 2 or not set(pair) <= _HEX:
                raise BadIdError("bad escape")
            out.append(int(pair, 16))
            i += 3
            continue
        out += ch.encode("utf-8")
        i += 1
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadIdError("not utf-8") from exc


def decode_run_id(wire: str) -> str:
    """A path segment to a bound run id, or ``BadIdError``."""
    bound = unproject_id(wire)
    if not RUN_ID_RE.match(bound):
        raise BadIdError("not a run id")
    return bound


def is_run_id(value: object) -> bool:
    return isinstance(value, str) and bool(RUN_ID_RE.match(value))


def tenant_of(run_id: str) -> str:
    return run_id.split("/", 1)[0]
