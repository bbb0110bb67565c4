"""Which machines' runs hold a tenant slot (decision 0160), as their tasks are told: a fork's machine tells every task
that may end its run that it holds none (``holdsSlot``: false), so its end reads and writes no slot; the run machine
tells them nothing (a run holds one)."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENDING_TASKS = ("Advance", "AdvanceOnce", "FailRun", "ParkedTimeout")  # the run's end gives back its slot there


def _payloads(machine: str) -> dict[str, dict]:
    states = json.loads((ROOT / "statemachines" / f"{machine}.asl.json").read_text())["States"]
    return {name: states[name]["Parameters"]["Payload"] for name in ENDING_TASKS if name in states}


def test_a_fork_s_tasks_are_told_it_holds_no_slot():
    payloads = _payloads("fork-replay")
    assert set(payloads) == set(ENDING_TASKS)
    assert {name: p.get("holdsSlot") for name, p in payloads.items()} == dict.fromkeys(ENDING_TASKS, False)
    chained = _payloads("fork-chain")  # decision 0191: one task, failed by FailRun
    assert {name: p.get("holdsSlot") for name, p in chained.items()} == {"Advance": False, "FailRun": False}


def test_a_run_s_tasks_are_told_nothing_of_slots():
    for machine in ("run", "run-chain"):
        payloads = _payloads(machine)
        assert "Advance" in payloads and all("holdsSlot" not in p for p in payloads.values())


def test_the_task_input_reads_the_flag_as_a_boolean():
    import pytest

    from functions._common import task_input as ti

    assert ti.flag({"holdsSlot": False}, "holdsSlot", True) is False
    assert ti.flag({}, "holdsSlot", True) is True
    with pytest.raises(ti.TaskInputError):
        ti.flag({"holdsSlot": "false"}, "holdsSlot", True)
