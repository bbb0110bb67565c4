"""Named experiments (issue 25): ``eval run --name``, ``GET /host/openwop-serverless/eval-runs`` and ``eval list``
with their filters, ``--baseline stable`` (the run that admitted the stable deployment) and ``--baseline last``."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.integration.test_agent_deployments import _promote, _register
from tests.integration.test_eval_runs import golden, put_suite
from tests.wire import raw

BASE = "/host/openwop-serverless"


def cli(host: Any, capsys: Any, *args: str, key: str | None = None) -> tuple[int, str, str]:
    from shared.local.commands import main

    code = main(["eval", *args, "--endpoint", host.base_url, "--api-key", key or host.key_a])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture(scope="module")
def lab(host):
    """An agent with 1.0.0 and 2.0.0 (both answer right) and a one-task suite of its own."""
    org = "n" + uuid.uuid4().hex[:8]
    agent_id = f"{org}.answerer"
    for version in ("1.0.0", "2.0.0"):
        _register(host, agent_id, version, "42")
    suite = f"tests.{org}.evals.answer"
    assert (
        put_suite(
            host,
            host.key_a,
            {
                "suiteId": suite,
                "version": "1.0.0",
                "modes": ["golden", "regression"],
                "targetAgentId": agent_id,
                "tasks": [{"taskId": "q", "input": "What is six times seven?", "expected": golden("42")}],
            },
        ).status
        == 201
    )
    return {"agent": agent_id, "suite": suite, "runs": {}}


def _run(host: Any, capsys: Any, lab: dict[str, Any], version: str, *extra: str) -> dict[str, Any]:
    code, out, err = cli(
        host,
        capsys,
        "run",
        "--suite",
        f"{lab['suite']}@1.0.0",
        "--agent",
        f"{lab['agent']}@{version}",
        "--wait",
        "--json",
        *extra,
    )
    assert code == 0, out + err
    return dict(json.loads(out))


def _listed(host: Any, query: str, key: str | None = None) -> Any:
    return raw(host.base_url, "GET", f"{BASE}/eval-runs?{query}", key=key or host.key_a)


def test_a_named_run_is_listed_with_its_suite_agent_score_and_verdict(host, lab, capsys):
    # Given an eval run started with --name
    first = _run(host, capsys, lab, "1.0.0", "--name", "nightly 1")
    lab["runs"]["v1"] = first["runId"]
    # When the tenant lists its eval runs by that name
    r = _listed(host, "name=nightly%201&suite=" + lab["suite"])
    # Then exactly that run is listed with what it evaluated and how it did
    assert r.status == 200, r.text
    [row] = r.json["evalRuns"]
    assert {
        k: row[k]
        for k in (
            "runId",
            "suiteId",
            "suiteVersion",
            "agentId",
            "agentVersion",
            "name",
            "status",
            "aggregateScore",
            "verdict",
        )
    } == {
        "runId": first["runId"],
        "suiteId": lab["suite"],
        "suiteVersion": "1.0.0",
        "agentId": lab["agent"],
        "agentVersion": "1.0.0",
        "name": "nightly 1",
        "status": "completed",
        "aggregateScore": 1.0,
        "verdict": "passed",
    }
    assert row["startedAt"] and row["createdAt"]
    # and another tenant's listing never shows it
    other = _listed(host, "suite=" + lab["suite"], key=host.key_b)
    assert other.status == 200 and other.json == {"evalRuns": []}


def test_baseline_stable_is_the_run_that_admitted_the_stable_deployment(host, lab, capsys):
    # Given 1.0.0 promoted to active on stable with its eval run as evidence
    v1 = lab["runs"].get("v1") or _run(host, capsys, lab, "1.0.0", "--name", "nightly 1")["runId"]
    lab["runs"]["v1"] = v1
    client = host.client(host.key_a)
    assert _promote(client, lab["agent"], "1.0.0", toState="active", evalRunId=v1).channels == ["stable"]
    # When 2.0.0 is evaluated against --baseline stable
    rep = _run(host, capsys, lab, "2.0.0", "--baseline", "stable", "--name", "candidate")
    lab["runs"]["v2"] = rep["runId"]
    # Then its baseline is the admitting run, paired on every task
    assert rep["baselineRunId"] == v1
    assert (rep["pairedVerdict"], rep["pairedTaskCount"], rep["verdict"]) == ("unchanged", 1, "unchanged")


def test_baseline_last_is_the_newest_passed_eval_of_the_suite_and_agent_at_another_version(host, lab, capsys):
    # Given two finished eval runs of the suite and agent (v1 at 1.0.0, named "nightly 1", then v2 at 2.0.0)
    v1 = lab["runs"].get("v1") or _run(host, capsys, lab, "1.0.0", "--name", "nightly 1")["runId"]
    v2 = lab["runs"].get("v2") or _run(host, capsys, lab, "2.0.0", "--baseline", v1)["runId"]
    # When a third run of 2.0.0 asks for --baseline last
    code, out, err = cli(
        host,
        capsys,
        "run",
        "--suite",
        f"{lab['suite']}@1.0.0",
        "--agent",
        f"{lab['agent']}@2.0.0",
        "--baseline",
        "last",
        "--wait",
        "--json",
    )
    assert code == 0, out + err
    rep = json.loads(out)
    v3 = rep["runId"]
    # Then its baseline is v1: v2 ran 2.0.0, the candidate's own version, so it is passed over (issue 36)
    assert rep["baselineRunId"] == v1
    # and the CLI says which run it picked: its id, agent version, experiment name, age and verdict
    assert f"baseline last: {v1} (agent version 1.0.0, experiment nightly 1, " in err and " ago, passed)" in err
    assert (rep["baseline"]["runId"], rep["baseline"]["agentVersion"], rep["baseline"]["picked"]) == (
        v1,
        "1.0.0",
        "last",
    )
    # and compare --baseline last pairs v2 with v1 too (older than v2, another version), not with itself or v3
    code, out, err = cli(host, capsys, "compare", v2, "--baseline", "last", "--json")
    assert code == 0, out + err
    assert json.loads(out)["baselineRunId"] == v1
    # and with --baseline-any, last is the newest completed eval older than v3 whatever its version: v2
    code, out, err = cli(host, capsys, "compare", v3, "--baseline", "last", "--baseline-any", "--json")
    assert code == 0, out + err
    assert json.loads(out)["baselineRunId"] == v2
    # and eval list shows the three, newest first, with what a reader tells them apart by
    code, out, err = cli(host, capsys, "list", "--suite", lab["suite"], "--agent", lab["agent"], "--json")
    assert code == 0, out + err
    rows = json.loads(out)["evalRuns"]
    assert [(r["runId"], r["agentVersion"], r["verdict"]) for r in rows] == [
        (v3, "2.0.0", "unchanged"),
        (v2, "2.0.0", "unchanged"),
        (v1, "1.0.0", "passed"),
    ]
    # and the host route pages them by its signed cursor, which another tenant cannot use
    first = _listed(host, f"suite={lab['suite']}&limit=1")
    assert [r["runId"] for r in first.json["evalRuns"]] == [v3] and first.json["nextCursor"]
    second = _listed(host, f"suite={lab['suite']}&limit=1&cursor={first.json['nextCursor']}")
    assert [r["runId"] for r in second.json["evalRuns"]] == [v2]
    foreign = _listed(host, f"suite={lab['suite']}&limit=1&cursor={first.json['nextCursor']}", key=host.key_b)
    assert (foreign.status, foreign.json["error"]) == (400, "validation_error")
    code, out, _ = cli(host, capsys, "list", "--suite", lab["suite"], "--name", "nightly 1")
    assert code == 0
    table = [line for line in out.splitlines() if v1 in line]
    assert len(table) == 1 and f"{lab['suite']}@1.0.0" in table[0] and "1.00" in table[0] and "passed" in table[0]
    assert v2 not in out and v3 not in out


def test_a_named_baseline_that_names_no_run_is_a_usage_error(host, capsys):
    # Given an agent with no stable deployment and a suite with no eval run
    org = "n" + uuid.uuid4().hex[:8]
    _register(host, f"{org}.idle", "1.0.0", "42")
    # When an eval run asks for --baseline stable / last
    for value in ("stable", "last"):
        code, out, err = cli(
            host,
            capsys,
            "run",
            "--suite",
            f"tests.{org}.evals.none@1.0.0",
            "--agent",
            f"{org}.idle",
            "--baseline",
            value,
        )
        # Then it exits 3 with one error line, and starts nothing
        assert code == 3 and out == "", (out, err)
        assert err.startswith("error: ") and err.count("\n") == 1, err


def test_bad_names_and_filters_are_400_validation_error(host, lab):
    # Given an over-long name, a non-string name, an unknown filter, an unknown status, empty values
    too_long = {
        "mode": "eval",
        "evalSuiteRef": f"{lab['suite']}@1.0.0",
        "agentId": lab["agent"],
        "configurable": {"version": 1, "extensions": {"openwop-serverless": {"name": "x" * 129}}},
    }
    not_text = {**too_long, "configurable": {"version": 1, "extensions": {"openwop-serverless": {"name": 7}}}}
    # When they are sent
    created = [raw(host.base_url, "POST", "/runs", body, key=host.key_a) for body in (too_long, not_text)]
    listed = [_listed(host, q) for q in ("tenant=x", "status=bogus", "name=" + "y" * 129, "cursor=", "suite=")]
    # Then each is the protocol's 400 validation_error envelope
    for r in created + listed:
        assert (r.status, r.json["error"]) == (400, "validation_error"), r.text
    assert created[0].json["details"]["errors"][0]["pointer"] == "/configurable/extensions/openwop-serverless/name"
