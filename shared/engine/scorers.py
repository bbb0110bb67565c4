"""Golden scorers, pure: ``expected.match.strategy`` -> a score, a pass and a reason (docs/decisions/0114).

The spec's three (``exact``, ``contains``, ``json-match``) and this host's extension: ``regex`` (Python ``re.search``
on the stringified output), ``json-schema`` (the output, a JSON string parsed first, validates against ``value``),
``json-path`` (the value at the RFC 6901 pointer ``path`` equals ``value``, or with ``op: "contains"`` contains it),
``numeric`` (the output, or the number at ``path``, is within ``tolerance`` of ``value``), ``not-<strategy>``
(the negation of any of those), ``cost-below`` / ``latency-below`` (the trial's model-call cost in USD, its
recorded call durations in ms, strictly below ``value``) and ``all-of`` (every part of ``of`` passes; the score
is the parts' scores weighted by their ``weight``, default 1).

Reasons name strategies, pointers, schema keywords and the trial's cost/latency, never the output's values (the
report shows those beside them, or hides both for a content-free agent).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from shared.engine.canonical import canonical, same_json
from shared.engine.jsondiff import resolve
from shared.errors import fault

BASE = ("exact", "contains", "json-match", "regex", "json-schema", "json-path", "numeric")
FACTS = ("cost-below", "latency-below")
NEGATED = tuple(f"not-{s}" for s in BASE)
COMPOSITE = ("all-of",)
# Answered before scoring: a registered tool (shared.engine.toolscorer), the LLM judge (shared.engine.judge).
ANSWERED = ("tool", "judge")
STRATEGIES = BASE + NEGATED + FACTS + COMPOSITE + ANSWERED


@dataclass(frozen=True)
class Facts:
    """What a scorer may read besides the output: the trial's cost and latency (recorded, so a replay agrees)."""

    cost_usd: float | None = None
    latency_ms: int = 0
    answers: dict[str, Scored] | None = None  # the tools' and the judge's answers by the match's pointer


@dataclass(frozen=True)
class Scored:
    strategy: str
    score: float
    passed: bool
    reason: str
    parts: tuple[Scored, ...] = ()

    def doc(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "strategy": self.strategy,
            "score": self.score,
            "passed": self.passed,
            "reason": self.reason,
        }
        if self.parts:
            out["parts"] = [p.doc() for p in self.parts]
        return out


def text(value: Any) -> str:
    """The "stringified output": a string as is, anything else as canonical JSON."""
    return value if isinstance(value, str) else canonical(value)


def as_json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(float(value)) else None
    if isinstance(value, str):
        try:
            n = float(value.strip())
        except ValueError:
            return None
        return n if math.isfinite(n) else None
    return None


@lru_cache(maxsize=64)
def _pattern(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


def _schema_validator(schema_json: str) -> Any:
    from jsonschema import Draft202012Validator  # lazy: keeps jsonschema off the cold import

    return Draft202012Validator(json.loads(schema_json))


_validators: dict[str, Any] = {}


def _validator(schema: Any) -> Any:
    key = canonical(schema)
    v = _validators.get(key)
    if v is None:
        if len(_validators) >= 64:
            _validators.clear()
        v = _validators[key] = _schema_validator(key)
    return v


def _contains(whole: Any, part: Any) -> bool:
    """A string contains a substring; an array contains an equal item; an object contains a sub-object."""
    if isinstance(whole, str):
        return isinstance(part, str) and part in whole
    if isinstance(whole, list):
        return any(same_json(item, part) for item in whole)
    if isinstance(whole, dict) and isinstance(part, dict):
        return all(k in whole and same_json(whole[k], v) for k, v in part.items())
    return False


def _exact(output: Any, value: Any) -> tuple[bool, str]:
    ok = text(output) == text(value)
    return ok, "the output equals the value" if ok else "the output differs from the value"


def _contains_text(output: Any, value: Any) -> tuple[bool, str]:
    ok = text(value) in text(output)
    return ok, "the output contains the value" if ok else "the output does not contain the value"


def _json_match(output: Any, value: Any) -> tuple[bool, str]:
    ok = same_json(as_json(output), as_json(value))
    return ok, "the output is the same JSON" if ok else "the output is different JSON"


def _regex(output: Any, value: Any) -> tuple[bool, str]:
    pattern = _pattern(str(value))
    if pattern is None:
        return False, "the pattern is not a regular expression"
    ok = pattern.search(text(output)) is not None
    return ok, "the output matches the pattern" if ok else "the output does not match the pattern"


def _json_schema(output: Any, value: Any) -> tuple[bool, str]:
    try:
        errors = sorted(_validator(value).iter_errors(as_json(output)), key=lambda e: list(e.absolute_path))
    except Exception:  # noqa: BLE001 - a schema the suite check let through (registered before it)
        return False, "the value is not a JSON Schema"
    if not errors:
        return True, "the output validates against the schema"
    first = errors[0]
    where = "/" + "/".join(str(p) for p in first.absolute_path)
    return False, f"the output does not validate: {first.validator} at {where} ({len(errors)} errors)"


# The strategies that compare the whole output with the expectation's value.
_WHOLE_OUTPUT = {
    "exact": _exact,
    "contains": _contains_text,
    "json-match": _json_match,
    "regex": _regex,
    "json-schema": _json_schema,
}


def _json_path(match: dict[str, Any], path: str, at: Any, value: Any) -> tuple[bool, str]:
    if match.get("op") == "contains":
        ok = _contains(at, value)
        return ok, f"the value at {path!r} {'contains' if ok else 'does not contain'} the expected value"
    ok = same_json(at, value)
    return ok, f"the value at {path!r} {'equals' if ok else 'differs from'} the expected value"


def _numeric(match: dict[str, Any], at: Any, value: Any) -> tuple[bool, str]:
    actual = _number(at)
    expected = _number(value)
    tolerance = float(match.get("tolerance", 0))
    if actual is None or expected is None:
        return False, "the output is not a number" if actual is None else "the value is not a number"
    ok = abs(actual - expected) <= tolerance + 1e-12
    return ok, (
        f"the output is within {tolerance:g} of the value"
        if ok
        else f"the output is further than {tolerance:g} from the value"
    )


def _base(strategy: str, match: dict[str, Any], output: Any) -> tuple[bool, str]:
    value = match.get("value")
    whole = _WHOLE_OUTPUT.get(strategy)
    if whole is not None:
        return whole(output, value)
    path = str(match.get("path", ""))
    found, at = resolve(as_json(output), path) if "path" in match or strategy == "json-path" else (True, output)
    if not found:
        return False, f"the output has no value at {path!r}"
    if strategy == "json-path":
        return _json_path(match, path, at, value)
    return _numeric(match, at, value)  # numeric


def score(match: dict[str, Any], output: Any, facts: Facts | None = None, at: str = "") -> Scored:
    """Score one golden expectation (``at``: its pointer in the match tree); an unknown strategy scores 0 (the
    suite schema refuses it first)."""
    facts = facts or Facts()
    strategy = str(match.get("strategy"))
    if strategy in BASE:
        ok, why = _base(strategy, match, output)
        return Scored(strategy, 1.0 if ok else 0.0, ok, why)
    if strategy in NEGATED:
        ok, why = _base(strategy[4:], match, output)
        return Scored(strategy, 0.0 if ok else 1.0, not ok, f"negated: {why}")
    if strategy == "cost-below":
        cost = float(facts.cost_usd or 0.0)
        ok = cost < float(match.get("value", 0))
        return Scored(
            strategy,
            1.0 if ok else 0.0,
            ok,
            f"cost {cost:g} USD is {'below' if ok else 'not below'} {float(match.get('value', 0)):g}",
        )
    if strategy == "latency-below":
        ok = facts.latency_ms < float(match.get("value", 0))
        return Scored(
            strategy,
            1.0 if ok else 0.0,
            ok,
            f"latency {facts.latency_ms} ms is {'below' if ok else 'not below'} {float(match.get('value', 0)):g}",
        )
    if strategy == "all-of":
        parts = tuple(score(p, output, facts, f"{at}/of/{i}") for i, p in enumerate(match.get("of") or []))
        weights = [float(p.get("weight", 1)) for p in match.get("of") or []]
        total = sum(weights)
        if not parts:
            return Scored(strategy, 0.0, False, "no parts")
        s = (
            sum(w * p.score for w, p in zip(weights, parts, strict=True)) / total
            if total > 0
            else sum(p.score for p in parts) / len(parts)
        )
        ok = all(p.passed for p in parts)
        failing = [p.strategy for p in parts if not p.passed]
        why = (
            f"all {len(parts)} parts passed"
            if ok
            else f"{len(parts) - len(failing)} of {len(parts)} parts passed (failed: {', '.join(failing)})"
        )
        return Scored(strategy, s, ok, why, parts)
    if strategy in ANSWERED:
        got = (facts.answers or {}).get(at)
        return got if got is not None else Scored(strategy, 0.0, False, f"no {strategy} answer")
    return Scored(strategy, 0.0, False, "unknown strategy")


def find(match: dict[str, Any], strategy: str, at: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every match of ``strategy`` in a match tree, by its pointer (``""``, ``/of/1``, ...), in document order."""
    if match.get("strategy") == strategy:
        return [(at, match)]
    out: list[tuple[str, dict[str, Any]]] = []
    for i, part in enumerate(match.get("of") or []):
        out.extend(find(part, strategy, f"{at}/of/{i}"))
    return out


_NUMBER_VALUE = ("numeric", "not-numeric", "cost-below", "latency-below")
_PATHS = ("json-path", "not-json-path", "numeric", "not-numeric")


def _member_problems(match: dict[str, Any], strategy: str) -> list[str]:
    """The members a strategy must or must not have, as (member, keyword): the suite schema stays flat, so a
    schema-driven fuzzer or client generates bodies quickly; this host checks the rest."""
    out: list[str] = []
    composite = strategy == "all-of"
    if composite != ("of" in match) or composite == ("value" in match):
        out.append("of" if composite != ("of" in match) else "value")
    if (strategy == "tool") != ("tool" in match):
        out.append("tool")
    if (
        ("path" in match)
        and strategy not in _PATHS
        or strategy in ("json-path", "not-json-path")
        and "path" not in match
    ):
        out.append("path")
    if "op" in match and strategy not in ("json-path", "not-json-path"):
        out.append("op")
    if "tolerance" in match and strategy not in ("numeric", "not-numeric"):
        out.append("tolerance")
    value = match.get("value")
    if "value" in match and (
        strategy in _NUMBER_VALUE
        and (not isinstance(value, int | float) or isinstance(value, bool))
        or strategy in FACTS
        and isinstance(value, int | float)
        and value < 0
        or strategy in ("regex", "not-regex")
        and not (isinstance(value, str) and len(value) <= 1000)
        or strategy == "judge"
        and not (isinstance(value, str) and 0 < len(value) <= 4000)
        or strategy in ("json-schema", "not-json-schema")
        and not isinstance(value, dict | bool)
    ):
        out.append("value")
    return out


def problems(match: dict[str, Any], at: str) -> list[dict[str, str]]:
    """What the flat suite schema does not check in a match: each strategy's members, a pattern that does not
    compile, a schema that is not a schema. (JSON pointers and keywords only, never the offending values.)"""
    strategy = str(match.get("strategy"))
    out = [
        fault(f"{at}/{m}", strategy, "The strategy does not take this member (or needs it), or not this kind of value.")
        for m in _member_problems(match, strategy)
    ]
    if out:
        return out
    base = strategy[4:] if strategy.startswith("not-") else strategy
    if base == "regex" and _pattern(str(match.get("value"))) is None:
        out.append(fault(f"{at}/value", "regex", "The value is not a regular expression this host compiles."))
    if base == "json-schema":
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        try:
            Draft202012Validator.check_schema(match.get("value"))
        except SchemaError:
            out.append(fault(f"{at}/value", "json-schema", "The value is not a JSON Schema 2020-12."))
    for i, part in enumerate(match.get("of") or []):
        out.extend(problems(part, f"{at}/of/{i}"))
    return out
