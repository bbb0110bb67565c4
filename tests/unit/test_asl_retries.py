"""The state machines ride out Lambda throttling: every Lambda task retries Lambda's throttling and service errors
with full-jitter exponential backoff for far longer than 5 minutes (the ASL files as deployed and as run on moto),
and a parked run waits at most ``parkedTimeout`` before it fails ``run_timeout`` without failing its execution."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
THROTTLING = {
    "Lambda.TooManyRequestsException",
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
}
FIVE_MINUTES = 300.0


def _lambda_tasks(states: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = {}
    for name, state in states.items():
        if state.get("Type") == "Task" and str(state.get("Resource", "")).startswith("arn:aws:states:::lambda:"):
            found[name] = state
        if state.get("ItemProcessor"):
            found.update(_lambda_tasks(state["ItemProcessor"]["States"]))
    return found


def _machines() -> list[tuple[str, dict[str, Any]]]:
    return [(p.name, json.loads(p.read_text())) for p in sorted((ROOT / "statemachines").glob("*.asl.json"))]


def _invoking(doc: dict[str, Any], function: str) -> dict[str, dict[str, Any]]:
    """The machine's Lambda tasks that invoke ``function`` (its placeholder's name): a hold machine's loop and its
    chained tasks after a hold alike (decision 0192)."""
    tasks = _lambda_tasks(doc["States"])
    return {n: t for n, t in tasks.items() if t["Parameters"]["FunctionName"] == f"${{{function}}}"}


ADVANCING = [(m, d, n) for m, d in _machines() for n in _invoking(d, "AdvanceRunFunction")]
PARKING = [(m, d, n) for m, d in _machines() for n in _invoking(d, "ParkRunFunction")]


def test_every_machine_of_a_run_advances_it_and_the_hold_machines_park_it_twice() -> None:
    assert {(m, n) for m, _, n in ADVANCING} >= {
        ("run.asl.json", "Advance"),
        ("run.asl.json", "AdvanceOnce"),
        ("run-chain.asl.json", "Advance"),
        ("fork-replay.asl.json", "AdvanceOnce"),
        ("fork-chain.asl.json", "Advance"),
    }
    assert {(m, n) for m, _, n in PARKING} == {
        ("run.asl.json", "Park"),
        ("run.asl.json", "ParkOnce"),
        ("fork-replay.asl.json", "Park"),
        ("fork-replay.asl.json", "ParkOnce"),
    }


def delays(retrier: dict[str, Any]) -> list[float]:
    """The nominal wait before each retry (ASL: interval x rate^(n-1), capped at MaxDelaySeconds)."""
    interval, rate = retrier.get("IntervalSeconds", 1), retrier.get("BackoffRate", 2.0)
    cap = retrier.get("MaxDelaySeconds", math.inf)
    return [min(interval * rate**n, cap) for n in range(retrier.get("MaxAttempts", 3))]


def test_the_window_arithmetic_can_fail() -> None:
    # The old retrier (1 s, x2, 4 attempts) rode out 15 s: the checks below would refuse it
    old = {"IntervalSeconds": 1, "MaxAttempts": 4, "BackoffRate": 2}
    assert sum(delays(old)) == 15 and sum(delays(old)) / 2 < FIVE_MINUTES


@pytest.mark.parametrize(("machine", "doc"), _machines())
def test_every_lambda_task_rides_out_throttling_for_well_over_five_minutes(machine: str, doc: dict[str, Any]) -> None:
    tasks = _lambda_tasks(doc["States"])
    assert tasks, machine
    for name, task in tasks.items():
        # Given the first retrier that matches Lambda's throttling (retriers are tried in order)
        retrier = next(r for r in task["Retry"] if set(r["ErrorEquals"]) & THROTTLING)
        assert THROTTLING <= set(retrier["ErrorEquals"]), (machine, name)
        earlier = task["Retry"][: task["Retry"].index(retrier)]
        assert all(not {"States.ALL", "States.TaskFailed"} & set(r["ErrorEquals"]) for r in earlier), (machine, name)
        # Then it backs off with full jitter, at most a minute apart
        assert retrier["JitterStrategy"] == "FULL" and retrier["MaxDelaySeconds"] == 60, (machine, name)
        # and full jitter waits uniform(0, d) before each retry: expected sum(d)/2, at least 5 minutes
        ds = delays(retrier)
        expected = sum(ds) / 2
        assert expected >= 3 * FIVE_MINUTES, (machine, name, expected)
        # and the chance of riding out less than 5 minutes is below 1e-4 (Hoeffding's bound for sums of uniforms)
        assert math.exp(-2 * (expected - FIVE_MINUTES) ** 2 / sum(d * d for d in ds)) < 1e-4, (machine, name)


@pytest.mark.parametrize(("machine", "doc", "name"), PARKING)
def test_a_parked_run_times_out_into_run_timeout_without_failing_its_execution(
    machine: str, doc: dict[str, Any], name: str
) -> None:
    states = doc["States"]
    park = states[name]
    # Given a Park task: its wait is bounded by the parkedTimeout the Advance results (or a hold's input) carry
    assert park["TimeoutSecondsPath"] == "$.parkedTimeoutSeconds" and "HeartbeatSeconds" not in park
    assert (
        states["Advance"]["ResultSelector"]["parkedTimeoutSeconds.$"]
        == "States.StringToJson('${ParkedTimeoutSeconds}')"
    )
    # Then a timeout is caught before States.ALL and goes to ParkedTimeout, which fails the run through FailRun ...
    catches = [c["ErrorEquals"] for c in park["Catch"]]
    assert catches.index(["States.Timeout"]) < catches.index(["States.ALL"])
    timeout_catch = next(c for c in park["Catch"] if c["ErrorEquals"] == ["States.Timeout"])
    target = states[timeout_catch["Next"]]
    assert target["Parameters"] == states["FailRun"]["Parameters"] and timeout_catch["ResultPath"] == "$.error"
    # ... and ends the execution as a success (no ExecutionsFailed alarm, no deploy rolled back for it)
    assert states[target["Next"]]["Type"] == "Succeed"
    # and no retrier of Park matches States.Timeout (States.TaskFailed does not)
    assert all("States.Timeout" not in r["ErrorEquals"] and "States.ALL" not in r["ErrorEquals"] for r in park["Retry"])


@pytest.mark.parametrize(("machine", "doc", "name"), ADVANCING)
def test_a_build_of_another_engine_version_is_retried_past_a_traffic_shift(
    machine: str, doc: dict[str, Any], name: str
) -> None:
    from infra.deploy_configs import SHIFT_MINUTES

    retrier = next(r for r in doc["States"][name]["Retry"] if "EngineVersionMismatchError" in r["ErrorEquals"])
    # Then the engine-version refusal is retried for longer (expected) than the longest traffic shift lasts
    assert sum(delays(retrier)) / 2 > 60 * max(SHIFT_MINUTES.values())


@pytest.mark.parametrize(("machine", "doc", "name"), ADVANCING)
def test_a_throttled_start_of_a_run_s_next_execution_is_ridden_out(
    machine: str, doc: dict[str, Any], name: str
) -> None:
    # Given the retrier of an Advance task that rides out Lambda's throttling
    retrier = next(r for r in doc["States"][name]["Retry"] if set(r["ErrorEquals"]) & THROTTLING)
    # Then a start of the run's next execution that Step Functions throttled (the task continues its run itself:
    # decision 0191) is retried as long, not failed after the short retrier of other task errors
    assert "ExecutionStartThrottledError" in retrier["ErrorEquals"], machine
