"""How a tool call is matched to a recorded fixture entry (pure): RFC 0244's exact match, relaxed by a task's
``fixtureMatching`` (host extension; the suite's is every task's default).

``fixtureMatching`` = ``{ignore?: [pointer], tolerance?: {pointer: number}, anyOf?: {pointer: [value]}}``, RFC 6901
pointers into the call's ``args``:
- ``ignore``: any difference at or under the pointer (a timestamp, a request id) is no difference;
- ``tolerance``: two numbers at the pointer match when they differ by at most the bound;
- ``anyOf``: the call's value at the pointer may be any of the listed values (the recorded one need not be listed).
Without rules an entry's ``args`` must equal the call's (deep JSON equality): the official default stays exact.

``closest`` finds the recorded entry nearest to a call that missed and ``would_match`` says which rules would have
matched it: the miss detail of the eval report and of the agent gateway's fail-closed answer.
"""

from __future__ import annotations

from typing import Any

from shared.engine.canonical import same_json
from shared.engine.jsondiff import differing_pointers

MISSING = object()


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def resolve(doc: Any, pointer: str) -> Any:
    """The value at an RFC 6901 pointer, or ``MISSING``."""
    if pointer == "":
        return doc
    cur = doc
    for raw in pointer.split("/")[1:]:
        token = _unescape(raw)
        if isinstance(cur, dict) and token in cur:
            cur = cur[token]
        elif isinstance(cur, list) and token.isdigit() and int(token) < len(cur):
            cur = cur[int(token)]
        else:
            return MISSING
    return cur


def _under(ptr: str, base: str) -> bool:
    return ptr == base or ptr.startswith(base + "/") or base == ""


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _covered(ptr: str, recorded: Any, actual: Any, rules: dict[str, Any], accepted: list[str]) -> bool:
    if any(_under(ptr, base) for base in list(rules.get("ignore") or []) + accepted):
        return True
    bound = (rules.get("tolerance") or {}).get(ptr)
    if bound is None:
        return False
    a, b = resolve(recorded, ptr), resolve(actual, ptr)
    return _number(a) and _number(b) and abs(float(a) - float(b)) <= float(bound)


def args_match(recorded: Any, actual: Any, rules: dict[str, Any] | None) -> bool:
    """Whether a call's ``actual`` args match an entry's ``recorded`` args under ``rules`` (None: exact)."""
    if not rules:
        return same_json(recorded, actual)
    accepted = [
        ptr
        for ptr, values in (rules.get("anyOf") or {}).items()
        if (got := resolve(actual, ptr)) is not MISSING and any(same_json(got, v) for v in values or [])
    ]
    return all(_covered(p, recorded, actual, rules, accepted) for p in differing_pointers(recorded, actual))


def would_match(recorded: Any, actual: Any, *, bounds: bool = True) -> dict[str, Any]:
    """The rules under which ``actual`` would have matched ``recorded``. ``ignore`` and ``tolerance`` together
    would have: ``tolerance`` (the smallest bound) where both sides are numbers, ``ignore`` for every other
    pointer. ``anyOf`` would have too, on its own for the pointers it names (the call's value, the only value it
    lists), at every differing pointer where the call has a value; a pointer the call dropped is ``ignore`` only.
    No recorded value is named. Without ``bounds`` (a content-free trial: a bound or a value tells what the call
    sent) every pointer is an ``ignore`` and there is no ``anyOf``."""
    ignore: list[str] = []
    tolerance: dict[str, float] = {}
    any_of: dict[str, list[Any]] = {}
    for ptr in differing_pointers(recorded, actual):
        a, b = resolve(recorded, ptr), resolve(actual, ptr)
        if bounds and _number(a) and _number(b):
            tolerance[ptr] = abs(float(a) - float(b))
        else:
            ignore.append(ptr)
        if bounds and b is not MISSING:
            any_of[ptr] = [b]
    out: dict[str, Any] = {}
    if ignore:
        out["ignore"] = ignore
    if tolerance:
        out["tolerance"] = tolerance
    if any_of:
        out["anyOf"] = any_of
    return out


def closest(call_tool: str, call_args: Any, entries: list[dict[str, Any]]) -> tuple[int, list[str]] | None:
    """The recorded entry nearest to a call: the same tool first, then the fewest differing pointers, then the
    earliest. Returns (index, pointers), or None when there is no entry at all."""
    best: tuple[tuple[int, int, int], int, list[str]] | None = None
    for i, entry in enumerate(entries):
        ptrs = differing_pointers(entry.get("args"), call_args)
        rank = (0 if entry.get("tool") == call_tool else 1, len(ptrs), i)
        if best is None or rank < best[0]:
            best = (rank, i, ptrs)
    return None if best is None else (best[1], best[2])


def rules_for(suite: dict[str, Any], task: dict[str, Any]) -> dict[str, Any] | None:
    """A task's matching rules: its own ``fixtureMatching``, else the suite's, else None (exact)."""
    rules = task.get("fixtureMatching", suite.get("fixtureMatching"))
    return dict(rules) if isinstance(rules, dict) and rules else None
