"""The deployed-stack smoke tests are deselected by marker in a normal run (``-m 'not e2e'`` in addopts), and
collected when asked for (``-m e2e``, as ``make e2e`` does); the module imports without AWS or the stack."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _collect(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENWOP_E2E_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_e2e_module_imports_without_a_stack() -> None:
    import tests.e2e.test_deployed_stack as module

    assert module.pytestmark.name == "e2e"


def test_e2e_tests_are_collected_only_when_asked_for() -> None:
    # When collecting with the default options, the e2e tests are deselected by marker (not skipped)
    default = _collect("tests/e2e", "tests/unit/test_e2e_selection.py")
    assert default.returncode == 0, default.stdout + default.stderr
    assert "test_deployed_stack.py" not in default.stdout
    assert "3 deselected" in default.stdout
    # When asked for with -m e2e (make e2e), the three smoke tests are collected
    asked = _collect("-m", "e2e", "tests/e2e")
    assert asked.returncode == 0, asked.stdout + asked.stderr
    listed = [line for line in asked.stdout.splitlines() if line.startswith("tests/e2e/test_deployed_stack.py::")]
    assert [line.split("::")[1] for line in listed] == [
        "test_discovery_answers_and_the_new_key_authenticates",
        "test_recorded_fixtures_and_a_baseline_through_openwop_client",
        "test_a_cancelled_side_effect_replays_fail_closed_and_erasure_removes_the_runs",
    ]


def test_asked_for_without_a_stack_the_e2e_tests_fail_with_the_instruction() -> None:
    # When the e2e tests run without OPENWOP_E2E_STACK / OPENWOP_E2E_REGION
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENWOP_E2E_")}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-m", "e2e", "tests/e2e", "-k", "discovery"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # Then they error (never skip) and say what to do
    assert run.returncode == 1, run.stdout
    assert "make e2e STAGE=<stage> REGION=<region>" in run.stdout and "skipped" not in run.stdout
