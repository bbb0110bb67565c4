"""Canonical JSON: the JSON Canonicalization Scheme (JCS, RFC 8785) through the ``rfc8785`` package, and hashes
over it, so another host computes the same ``argsHash`` for the same arguments.

JCS orders object keys by their UTF-16 code units, writes numbers as ECMAScript does (``1.0`` and ``1`` are both
``1``, ``-0.0`` is ``0``) and strings unescaped beyond what JSON requires. ``same_json(a, b)`` is exactly "the
canonical forms are equal", so it agrees with ``args_hash``.

Integers outside JCS's domain (I-JSON, ±(2**53 - 1)), which ``rfc8785`` refuses, are written as their exact
decimal digits: JCS has no exact form for them (a host that parses them as doubles has already lost digits), and
exact digits keep two different integers from ever comparing equal, so a fixture never serves a call it did not
record.
"""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

_SAFE = 2**53 - 1


def _unsafe_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and not -_SAFE <= value <= _SAFE


def _dump_wide(value: Any, out: list[bytes]) -> None:
    """JCS for values holding integers beyond its domain: containers walked here, every other leaf by ``rfc8785``."""
    if isinstance(value, dict):
        out.append(b"{")
        for i, key in enumerate(sorted(value, key=_utf16_order)):
            if i:
                out.append(b",")
            out.append(rfc8785.dumps(key))
            out.append(b":")
            _dump_wide(value[key], out)
        out.append(b"}")
    elif isinstance(value, list | tuple):
        out.append(b"[")
        for i, item in enumerate(value):
            if i:
                out.append(b",")
            _dump_wide(item, out)
        out.append(b"]")
    elif _unsafe_int(value):
        out.append(str(value).encode("ascii"))
    else:
        out.append(rfc8785.dumps(value))


def _utf16_order(key: Any) -> bytes:
    if not isinstance(key, str):
        raise rfc8785.CanonicalizationError("object keys must be strings")
    return key.encode("utf-16-be")  # RFC 8785 §3.2.3 (the order rfc8785 itself uses)


def canonical_bytes(value: Any) -> bytes:
    try:
        return rfc8785.dumps(value)
    except rfc8785.IntegerDomainError:
        out: list[bytes] = []
        _dump_wide(value, out)
        return b"".join(out)


def canonical(value: Any) -> str:
    return canonical_bytes(value).decode("utf-8")


def args_hash(value: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical_bytes(value)).hexdigest()


def same_json(a: Any, b: Any) -> bool:
    return canonical_bytes(a) == canonical_bytes(b)
