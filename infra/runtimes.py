"""The Lambda Python runtimes the stack may use, with AWS's dates for each (the "Supported runtimes" table of the
Lambda developer guide, as published; AWS may move a date, never silently: update this table when it does).

``deprecated`` is the date Lambda stops patching the runtime; ``updates_blocked`` the date from which a function on
it can no longer be updated (so ``cdk deploy`` fails). ``tests/infra`` fails once ``date.today()`` passes the
deprecation date of any function's runtime in the synthesized template, so the move to the next runtime happens
while deploys still work, not after the first refused one.

The runtime every function uses is :data:`LAMBDA_RUNTIME` (``shared.manifest.RUNTIME``); the dependencies layer is built for the same Python
(``infra/packaging.py`` reads :data:`LAMBDA_PYTHON`). The code itself stays runnable on the lowest Python
``requires-python`` admits (3.11: ruff's and mypy's target), which is what CI and local mode run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from shared import manifest


@dataclass(frozen=True)
class LambdaRuntime:
    name: str  # the runtime identifier (``Runtime`` of AWS::Lambda::Function)
    python: tuple[int, int]
    os: str
    deprecated: date
    updates_blocked: date


RUNTIMES: dict[str, LambdaRuntime] = {
    r.name: r
    for r in (
        LambdaRuntime("python3.11", (3, 11), "Amazon Linux 2", date(2026, 6, 30), date(2026, 8, 31)),
        LambdaRuntime("python3.12", (3, 12), "Amazon Linux 2023", date(2028, 10, 31), date(2029, 1, 10)),
        LambdaRuntime("python3.13", (3, 13), "Amazon Linux 2023", date(2029, 6, 30), date(2029, 8, 31)),
        LambdaRuntime("python3.14", (3, 14), "Amazon Linux 2023", date(2030, 6, 30), date(2030, 8, 31)),
    )
}

LAMBDA_RUNTIME = RUNTIMES[manifest.RUNTIME]
LAMBDA_PYTHON = LAMBDA_RUNTIME.python


def past_deprecation(runtime: str, today: date) -> bool:
    """True when ``runtime`` is deprecated on ``today``, or is not in the table at all (an unknown runtime has no
    known support window: treat it as unsupported)."""
    known = RUNTIMES.get(runtime)
    return known is None or today >= known.deprecated
