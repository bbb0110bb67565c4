"""A readable label for a task built from a recorded run (issue 36): ``extensions["openwop-serverless"].label``.

Without a template: a short summary of the run's input (a string as it is; an object as ``key=value`` pairs of its
members, scalar members first; anything else as compact JSON), at most ``SUMMARY_CHARS`` characters. With a template (the
from-runs body's ``label``, the CLI's ``--label``): each ``{input}`` / ``{input.a.b}`` field is the input or the member
at that path (a digit segment indexes an array), a string as it is, anything else as compact JSON, an absent member
``-``; the result is cut at ``MAX_CHARS``. Labels are display text only: nothing pairs or grades by them.
"""

from __future__ import annotations

import json
import re
from typing import Any

EXTENSION = "openwop-serverless"
SUMMARY_CHARS = 80
MAX_CHARS = 200
_FIELD = re.compile(r"\{input((?:\.[^{}.]+)*)\}")
_MISSING = object()


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), sort_keys=False, default=str)


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summary(value: Any) -> str:
    """The default label: a short, one-line summary of a run's input."""
    if isinstance(value, dict) and value:
        scalars = [(k, v) for k, v in value.items() if not isinstance(v, dict | list)]
        nested = [(k, v) for k, v in value.items() if isinstance(v, dict | list)]
        text = ", ".join(f"{k}={_text(v)}" for k, v in scalars + nested)
    else:
        text = _text(value)
    return _cut(text, SUMMARY_CHARS) or "-"


def _member(value: Any, path: str) -> Any:
    for part in [p for p in path.split(".") if p]:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def render(template: str | None, value: Any) -> str:
    """The label ``template`` gives a run's input (``summary`` when there is no template)."""
    if template is None:
        return summary(value)

    def fill(m: re.Match[str]) -> str:
        got = _member(value, m.group(1))
        return "-" if got is _MISSING else _text(got)

    return _cut(_FIELD.sub(fill, template), MAX_CHARS) or "-"


def labelled(task: dict[str, Any], label: str) -> dict[str, Any]:
    """``task`` with ``label`` in its host extension member (other members kept)."""
    ext = dict(task.get("extensions") or {})
    ext[EXTENSION] = {**(ext.get(EXTENSION) or {}), "label": label}
    return {**task, "extensions": ext}
