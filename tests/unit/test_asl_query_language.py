"""The ASL files use JSONPath only: the local host's moto 5.2.5 cannot evaluate JSONata (getmoto/moto#10105), and
the host carries no JSONata evaluator (the patch and its dependency were removed as unused)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _states(doc: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for state in doc.get("States", {}).values():
        found.append(state)
        for inner in (state.get("ItemProcessor"), state.get("Iterator"), *(state.get("Branches") or [])):
            if inner:
                found.extend(_states(inner))
    return found


def test_no_state_machine_uses_jsonata() -> None:
    files = sorted((ROOT / "statemachines").glob("*.asl.json"))
    assert len(files) >= 3
    for path in files:
        doc = json.loads(path.read_text())
        # Neither the machine nor any state (nested in Map or Parallel too) selects JSONata
        langs = {doc.get("QueryLanguage", "JSONPath")} | {s.get("QueryLanguage", "JSONPath") for s in _states(doc)}
        assert langs == {"JSONPath"}, path.name
        # and no field is a JSONata template
        assert "{%" not in path.read_text(), path.name
