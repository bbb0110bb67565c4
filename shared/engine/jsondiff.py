"""Where two JSON values differ, as RFC 6901 JSON pointers (pure).

Used by the eval report to say why a tool call missed its fixtures: the closest recorded call and the pointers
at which the arguments differ. Objects are compared key by key (a key on one side only differs at its pointer),
arrays index by index (extra items differ at their index), scalars by JSON equality (``1`` equals ``1.0``,
``true`` never equals ``1``).
"""

from __future__ import annotations

from typing import Any


def escape(token: str) -> str:
    """One reference token of a JSON pointer: ``~`` -> ``~0``, ``/`` -> ``~1`` (RFC 6901 §3)."""
    return token.replace("~", "~0").replace("/", "~1")


def _same_scalar(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b)
    return type(a) is type(b) and a == b


def differing_pointers(a: Any, b: Any, base: str = "") -> list[str]:
    """Every pointer at which ``a`` and ``b`` differ, shallowest first within a branch, in document order.
    ``[""]`` when the whole values differ in kind (the root pointer is the empty string)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted(set(a) | set(b)):
            ptr = f"{base}/{escape(str(key))}"
            if key not in a or key not in b:
                out.append(ptr)
            else:
                out.extend(differing_pointers(a[key], b[key], ptr))
        return out
    if isinstance(a, list) and isinstance(b, list):
        out = []
        for i in range(max(len(a), len(b))):
            ptr = f"{base}/{i}"
            if i >= len(a) or i >= len(b):
                out.append(ptr)
            else:
                out.extend(differing_pointers(a[i], b[i], ptr))
        return out
    if isinstance(a, dict | list) or isinstance(b, dict | list):
        return [base]
    return [] if _same_scalar(a, b) else [base]


_MISSING = object()


def resolve(doc: Any, pointer: str) -> tuple[bool, Any]:
    """(found, value) at an RFC 6901 pointer (``""`` is the whole document; ``~1`` is ``/``, ``~0`` is ``~``).
    An array index is decimal digits without a leading zero; ``-`` (past the end) is never found."""
    if pointer == "":
        return True, doc
    if not pointer.startswith("/"):
        return False, None
    value = doc
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict):
            value = value.get(token, _MISSING)
        elif (
            isinstance(value, list)
            and token.isdigit()
            and (token == "0" or not token.startswith("0"))
            and int(token) < len(value)
        ):
            value = value[int(token)]
        else:
            return False, None
        if value is _MISSING:
            return False, None
    return True, value
