"""Seeds for the eval loop's tests (report, CLI, viewer): a tenant's own suite in two versions, so a candidate
can regress one task against a baseline; and a recorded source run with a drifted replay (one fixture miss)."""

from __future__ import annotations

from typing import Any

from tests.helpers import unique
from tests.integration.test_eval_runs import AGENT, put_suite, run_eval

SOURCE = "conformance-eval-recorded-source"
DRIFT = "conformance-eval-recorded-drift"


def loop_suite(suite_id: str, version: str, *, regress: bool) -> dict[str, Any]:
    """Three tasks: ``steady`` (a live echo call), ``served`` (its echo answered by the suite's fixture) and
    ``answer``, whose candidate answer changes when ``regress`` (its score falls from 1 to 0)."""
    return {
        "suiteId": suite_id,
        "version": version,
        "modes": ["golden", "regression"],
        "trials": 2,
        "tasks": [
            {
                "taskId": "steady",
                "input": {"calls": [{"tool": "conformance.eval:echo", "args": {"text": "hi"}}], "answer": "steady"},
                "expected": {"kind": "golden", "match": {"strategy": "exact", "value": "steady"}},
            },
            {
                "taskId": "served",
                "input": {"calls": [{"tool": "conformance.eval:echo", "args": {"text": "fx"}}], "answer": "served"},
                "expected": {"kind": "golden", "match": {"strategy": "exact", "value": "served"}},
                "fixtures": {
                    "toolResponses": [
                        {"tool": "conformance.eval:echo", "args": {"text": "fx"}, "response": {"text": "fx"}}
                    ]
                },
            },
            {
                "taskId": "answer",
                "input": {"calls": [], "answer": "a changed answer" if regress else "the answer"},
                "expected": {"kind": "golden", "match": {"strategy": "exact", "value": "the answer"}},
            },
        ],
    }


def register_loop_suites(host: Any, key: str) -> str:
    """Register v1.0.0 (all pass) and v1.1.0 (``answer`` regresses) of a fresh suite; returns its id."""
    suite_id = f"tests.local.evals.{unique('s')}"
    for version, regress in (("1.0.0", False), ("1.1.0", True)):
        r = put_suite(host, key, loop_suite(suite_id, version, regress=regress))
        assert r.status in (200, 201), r.text
    return suite_id


def seed_regression(host: Any, client: Any, key: str) -> dict[str, str]:
    """A baseline (v1.0.0) and a regressed candidate (v1.1.0) vs it; returns their run ids and the suite id."""
    suite_id = register_loop_suites(host, key)
    base = run_eval(client, f"{suite_id}@1.0.0")
    cand = run_eval(client, f"{suite_id}@1.1.0", evalModes=["golden", "regression"], baselineRunId=base)
    return {"suite": suite_id, "base": base, "candidate": cand}


def seed_drift(client: Any) -> dict[str, str]:
    """A recorded source run and a drifted eval served from it: task ``record`` misses once (``/key``)."""
    source = run_eval(client, SOURCE)
    drift = run_eval(client, DRIFT, fixtureRuns={"record": source})
    return {"source": source, "drift": drift, "agent": AGENT}


def argument_suite(suite_id: str, version: str, limit: int) -> dict[str, Any]:
    """One task, ``lookup``: an echo call whose argument ``/opts/limit`` is ``limit``, graded by an exact trajectory
    expectation of ``limit`` 1 (a version that sends another limit fails it) and its answer; and ``same``, unchanged."""
    call = {"tool": "conformance.eval:echo", "args": {"text": "find", "opts": {"limit": limit}}}
    return {
        "suiteId": suite_id,
        "version": version,
        "modes": ["golden", "regression"],
        "trials": 1,
        "tasks": [
            {
                "taskId": "same",
                "input": {"calls": [], "answer": "same"},
                "expected": {"kind": "golden", "match": {"strategy": "exact", "value": "same"}},
            },
            {
                "taskId": "lookup",
                "input": {"calls": [call], "answer": "found"},
                "expected": {"kind": "golden", "match": {"strategy": "exact", "value": "found"}},
                "trajectory": {
                    "match": "exact",
                    "calls": [{"tool": "conformance.eval:echo", "args": {"text": "find", "opts": {"limit": 1}}}],
                },
            },
        ],
    }


def seed_argument_change(host: Any, client: Any, key: str) -> dict[str, str]:
    """A baseline (v1.0.0, ``limit`` 1) and a candidate (v2.0.0, ``limit`` 2: ``lookup`` regresses) vs it."""
    suite_id = f"tests.local.evals.{unique('args')}"
    for version, limit in (("1.0.0", 1), ("2.0.0", 2)):
        r = put_suite(host, key, argument_suite(suite_id, version, limit))
        assert r.status in (200, 201), r.text
    base = run_eval(client, f"{suite_id}@1.0.0")
    cand = run_eval(client, f"{suite_id}@2.0.0", evalModes=["golden", "regression"], baselineRunId=base)
    return {"suite": suite_id, "base": base, "candidate": cand}
