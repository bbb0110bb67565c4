"""The input of a Step Functions task, read without a validation library (pydantic is ~90 ms of a cold start).

A task's input is written by our own state machines (``statemachines/``), so reading it is checking it: each
field is read by name and kind, anything else in the event is ignored, and a missing or ill-typed field raises
``TaskInputError`` (a ``ValueError``: the task fails, its state machine's Catch fails the run).
"""

from __future__ import annotations

from typing import Any

_MISSING: Any = object()


class TaskInputError(ValueError):
    pass


def _get(event: Any, name: str, kinds: tuple[type, ...], default: Any) -> Any:
    if not isinstance(event, dict):
        raise TaskInputError("a task's input is an object")
    value = event.get(name, _MISSING)
    if value is _MISSING or (value is None and default is None):
        if default is _MISSING:
            raise TaskInputError(f"the task's input needs {name}")
        return default
    if not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds:
        raise TaskInputError(f"the task's {name} has the wrong type")
    return value


def text(event: Any, name: str, default: Any = _MISSING) -> Any:
    """A string field (``default`` when absent; no default: required)."""
    return _get(event, name, (str,), default)


def integer(event: Any, name: str, default: Any = _MISSING) -> Any:
    return _get(event, name, (int,), default)


def mapping(event: Any, name: str, default: Any = _MISSING) -> Any:
    return _get(event, name, (dict,), default)


def flag(event: Any, name: str, default: Any = _MISSING) -> Any:
    """A boolean field."""
    return _get(event, name, (bool,), default)
