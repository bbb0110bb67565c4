"""Request bodies: the advertised size limit, the nesting limit, and the one strict JSON reader.

``loads`` refuses what ``json.loads`` would accept but the rest of the host cannot carry: nesting deeper than
``MAX_JSON_DEPTH`` (checked over the raw text before parsing, so the parser never recurses deeply), the
non-JSON constants ``NaN``/``Infinity``/``-Infinity``, numbers that overflow to infinity (``1e400``),
lone UTF-16 surrogates written as ``\\ud800`` escapes (they cannot be encoded as UTF-8, so storing them fails),
and an object that names one member twice (I-JSON, RFC 7493 §2.3: ``json.loads`` would keep the last value, so
the body's meaning would depend on the parser's rule; a canonical-JSON host cannot accept that).
Every refusal is a ``BodyError`` (a ``ValueError``) with a fixed message and, for a repeated member, its name in
``details``; the caller turns it into ``400 validation_error``.
"""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from typing import Any

MAX_REQUEST_BODY_BYTES = 2_500_000
"""Advertised as ``limits.maxRequestBodyBytes``; a larger body is ``413 payload_too_large`` before parsing. API
Gateway hands the body to the Lambda as a JSON string, where escaping at most doubles it: 2.5 MB of any body stays
inside Lambda's 6 MB synchronous payload (a 10,000-task eval suite of ~250-byte tasks fits)."""

MAX_JSON_DEPTH = 64
"""Arrays and objects nested deeper than this are refused (the top-level value is level 1)."""

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


MAX_MEMBER_NAME_ECHO = 128
"""A repeated member's name is named in the refusal's ``details.member``, cut to this many characters."""


class BodyError(ValueError):
    """The body is not JSON this host accepts. ``details`` (optional) go into the refusal's envelope."""

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details = details


def json_depth(text: str) -> int:
    """The deepest bracket nesting outside string literals, without recursion (linear, in C loops)."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _refuse_constant(name: str) -> Any:
    raise BodyError(f"{name} is not JSON.")


EXACT_INT = 2**53
"""Integral numbers written with a fraction or an exponent (``1.0``, ``2e3``) up to this size read as integers."""


def _finite_float(text: str) -> float | int:
    """A JSON number with a fraction or exponent. One that is an integer (``1.0``) reads as one: JSON Schema's
    ``integer`` admits it, and its canonical (RFC 8785) form is ``1``, so a field the document calls an integer takes
    it, as a schema-driven client may send it. Past 2**53 a double no longer holds every integer, so it stays a float."""
    value = float(text)
    if not math.isfinite(value):
        raise BodyError("A number is out of range.")
    if value.is_integer() and abs(value) <= EXACT_INT:
        return int(value)
    return value


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook``: the object, unless a member name repeats (compared after unescaping, as RFC 7493)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise BodyError(
                    "The body names an object member more than once.", {"member": name[:MAX_MEMBER_NAME_ECHO]}
                )
            seen.add(name)
    return obj


def loads(text: str) -> Any:
    """Parse a request body strictly; ``BodyError`` for anything this host refuses."""
    if json_depth(text) > MAX_JSON_DEPTH:
        raise BodyError(f"The body nests deeper than {MAX_JSON_DEPTH} levels.")
    try:
        data = json.loads(
            text, parse_constant=_refuse_constant, parse_float=_finite_float, object_pairs_hook=_unique_members
        )
    except BodyError:
        raise
    except (ValueError, RecursionError) as exc:
        raise BodyError("The body is not valid JSON.") from exc
    if _SURROGATE_ESCAPE.search(text):
        try:
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise BodyError("The body holds a lone surrogate.") from exc
    return data
