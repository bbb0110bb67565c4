"""Reserved concurrency in the embedded AWS: a function invoked beyond its reservation is throttled, as on Lambda.

On AWS a function's reserved concurrency (``shared.manifest.RESERVED_CONCURRENCY``, deployed by
``infra/constructs/concurrency.py``) is its ceiling: an invocation past it answers ``429 TooManyRequestsException``,
which a Step Functions task sees as ``Lambda.TooManyRequestsException`` and retries per its ASL ``Retry``. Locally
the same ceiling is a counter per function: ``lambda_registry``'s ``invoke`` takes a unit (``acquire``) or raises
``Throttled``; an asynchronous (``Event``) invocation waits for a unit instead, as Lambda's own queue retries it.
``ceilings`` lowers (or lifts) ceilings for a block, so a test models a saturated pool with a few runs (decision
0160). Stream and queue pollers call handlers directly and are not counted (their mappings' concurrency is theirs).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from shared import manifest
from shared.local.context import manifest_function_by_local_name

_lock = threading.Condition()
_overrides: dict[str, int | None] = {}
_in_use: dict[str, int] = {}
_throttled: dict[str, int] = {}


class Throttled(Exception):
    """The function is at its reserved concurrency: Lambda's ``TooManyRequestsException`` (rate exceeded)."""


def _ceiling(name: str) -> int | None:
    """The ceiling of a function by its manifest name (an unknown one: none, unless a block sets one)."""
    if name in _overrides:
        return _overrides[name]
    return manifest.RESERVED_CONCURRENCY.get(name)


def function_key(local_name: str) -> str:
    """The manifest name of a local Lambda function (``advance_run``), or the local name of a registered one."""
    fn = manifest_function_by_local_name(local_name)
    return fn.name if fn is not None else local_name


def acquire(local_name: str, *, wait: bool = False) -> str:
    """Take one unit of the function's concurrency; raise ``Throttled`` at its ceiling (or wait for a unit when
    ``wait``). Returns the key to ``release``."""
    key = function_key(local_name)
    with _lock:
        while True:
            ceiling = _ceiling(key)
            if ceiling is None or _in_use.get(key, 0) < ceiling:
                _in_use[key] = _in_use.get(key, 0) + 1
                return key
            if not wait:
                _throttled[key] = _throttled.get(key, 0) + 1
                raise Throttled(f"Rate Exceeded. (reserved concurrency {ceiling} of {key} in use)")
            _lock.wait(1.0)


def release(key: str) -> None:
    with _lock:
        _in_use[key] = max(0, _in_use.get(key, 0) - 1)
        _lock.notify_all()


def throttled(name: str) -> int:
    """How many invocations of the function (manifest name) were throttled since the process started."""
    with _lock:
        return _throttled.get(name, 0)


def in_use(name: str) -> int:
    with _lock:
        return _in_use.get(name, 0)


@contextmanager
def ceilings(overrides: Mapping[str, int | None]) -> Iterator[None]:
    """TEST ONLY. For the block, the given functions' ceilings (manifest name -> executions; ``None``: no ceiling).
    Process-wide: every invocation meanwhile sees them."""
    with _lock:
        saved = {k: _overrides[k] for k in overrides if k in _overrides}
        _overrides.update(overrides)
    try:
        yield
    finally:
        with _lock:
            for k in overrides:
                _overrides.pop(k, None)
            _overrides.update(saved)
            _lock.notify_all()
