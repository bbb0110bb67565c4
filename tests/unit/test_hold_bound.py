"""A conformance hold is bounded: no input makes a run hold longer than HOLD_MAX_MS."""

from __future__ import annotations

import pytest

from shared.engine.runcore import HOLD_MAX_MS
from shared.engine.runcore import hold_delay as _hold_delay


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1e30, HOLD_MAX_MS),
        (3_600_000, HOLD_MAX_MS),
        (60_000, 60_000),
        (1500, 1500),
        (-5, 0),
        (True, 0),
        ("9", 0),
    ],
)
def test_hold_delay_is_bounded(value, expected):
    assert HOLD_MAX_MS == 60_000
    assert _hold_delay({"delayMs": value}) == expected
