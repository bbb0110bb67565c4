"""Every task that advances a run is told its execution's name (``$$.Execution.Name``): a task's stamp, and the one
it expects of the write before it, are made of it (decision 0173)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("machine", "state"),
    [
        ("run", "Advance"),
        ("run", "AdvanceOnce"),
        ("fork-replay", "Advance"),
        ("fork-replay", "AdvanceOnce"),
        ("run-chain", "Advance"),
        ("fork-chain", "Advance"),
    ],
)
def test_the_task_is_told_its_execution_s_name(machine, state):
    states = json.loads((ROOT / "statemachines" / f"{machine}.asl.json").read_text())["States"]
    assert states[state]["Parameters"]["Payload"]["execution.$"] == "$$.Execution.Name"
