"""The conformance fixtures shipped with the host (workflow definitions and eval suites)."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any


def _load(folder: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    base = resources.files("shared.fixtures").joinpath(folder)
    if not base.is_dir():
        return out
    for entry in sorted(base.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".json"):
            out[entry.name[: -len(".json")]] = json.loads(entry.read_text(encoding="utf-8"))
    return out


@lru_cache(maxsize=1)
def workflows() -> dict[str, dict[str, Any]]:
    return _load("workflows")


@lru_cache(maxsize=1)
def suites() -> dict[str, dict[str, Any]]:
    return _load("suites")


def suite_resolves(suite: dict[str, Any], agents: set[str], tools: set[str]) -> bool:
    target = suite.get("targetAgentId")
    if target is not None and target not in agents:
        return False
    for task in suite.get("tasks", []):
        script = task.get("input") if isinstance(task.get("input"), dict) else {}
        for call in script.get("calls", []) or []:
            if call.get("tool") not in tools:
                return False
    return True
