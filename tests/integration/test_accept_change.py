"""Accepting an intended change (issue 25 part 4): ``fixtureMatching`` rules, ``onMiss: "live-read-only"`` and
``eval accept``. A real loopback tool server counts every live hit."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from shared.protocol.ids import project_id
from tests.integration.test_eval_runs import AGENT, put_suite, run_eval
from tests.wire import raw

BASE = "/host/openwop-serverless"
OLD_AT = "2026-01-01T00:00:00Z"
NEW_AT = "2026-12-04T03:00:00Z"
ADA = {"customerId": "c-1", "name": "Ada Lovelace", "tier": "gold"}


def _suite_id() -> str:
    return f"tests.local.evals.acc{uuid.uuid4().hex[:10]}"


def _tool(host: Any, url: str, path: str, tier: str | None) -> str:
    tool_id = f"t{uuid.uuid4().hex[:8]}.crm:{path.strip('/').replace('/', '-')}"
    body: dict[str, Any] = {
        "toolId": tool_id,
        "description": "a loopback tool",
        "inputSchema": {"type": "object"},
        "source": {"kind": "http", "url": url + path, "method": "POST"},
    }
    if tier:
        body["safetyTier"] = tier
    r = raw(host.base_url, "POST", f"{BASE}/tools", body, key=host.key_a)
    assert r.status == 201, r.text
    return tool_id


@pytest.fixture(scope="module")
def tools(host, server):
    counter, url = server
    return {
        "server": counter,
        "lookup": _tool(host, url, "/crm/lookup", "read"),
        "ticket": _tool(host, url, "/tickets", None),
    }


def _task(
    task_id: str,
    calls: list[tuple[str, Any]],
    entries: list[dict[str, Any]],
    on_miss: str = "fail",
    answer: str = "done",
    **extra: Any,
) -> dict[str, Any]:
    return {
        "taskId": task_id,
        "input": {"calls": [{"tool": t, "args": a} for t, a in calls], "answer": answer},
        "expected": {"kind": "golden", "match": {"strategy": "exact", "value": answer}},
        "fixtures": {"toolResponses": entries, "onMiss": on_miss},
        **extra,
    }


def _register(host: Any, suite_id: str, version: str, tasks: list[dict[str, Any]], **extra: Any) -> str:
    r = put_suite(
        host, host.key_a, {"suiteId": suite_id, "version": version, "modes": ["golden"], "tasks": tasks, **extra}
    )
    assert r.status == 201, r.text
    return f"{suite_id}@{version}"


def _report(host: Any, run_id: str) -> dict[str, Any]:
    r = raw(host.base_url, "GET", f"{BASE}/runs/{project_id(run_id)}/eval-report", key=host.key_a)
    assert r.status == 200, r.text
    return {t["taskId"]: t for t in r.json["tasks"]}


def _stamped(tools: dict[str, Any]) -> tuple[list[tuple[str, Any]], list[dict[str, Any]]]:
    call = (tools["lookup"], {"customerId": "c-1", "at": NEW_AT})
    entry = {"tool": tools["lookup"], "args": {"customerId": "c-1", "at": OLD_AT}, "response": ADA}
    return [call], [entry]


def test_ignore_makes_a_timestamp_only_change_pass(host, tools):
    client = host.client(host.key_a)
    suite_id = _suite_id()
    calls, entries = _stamped(tools)
    # Given a recorded lookup whose only difference from the call is its timestamp
    exact = _register(host, suite_id, "1.0.0", [_task("stamp", calls, entries)])
    ignoring = _register(host, suite_id, "1.1.0", [_task("stamp", calls, entries)], fixtureMatching={"ignore": ["/at"]})
    before = tools["server"].count()
    # When it runs under the official exact match
    missed = _report(host, run_eval(client, exact))["stamp"]
    # Then it misses, and the miss names the rules that would have matched (no recorded value)
    assert (missed["verdict"], missed["fixtureMissCount"]) == ("unverifiable", 1)
    assert missed["fixtureMisses"][0]["differingPointers"] == ["/at"]
    assert missed["fixtureMisses"][0]["wouldMatchWith"] == {"ignore": ["/at"], "anyOf": {"/at": [NEW_AT]}}
    # When the suite ignores /at
    served = _report(host, run_eval(client, ignoring))["stamp"]
    # Then the recorded answer is served and the task passes, with no live hit either time
    assert (served["verdict"], served["fixtureMissCount"], served["liveToolCalls"]) == ("passed", 0, 0)
    assert [c["provenance"] for c in served["trialResults"][0]["toolCalls"]] == ["served"]
    assert tools["server"].count() == before


def test_any_of_serves_a_listed_changed_argument_and_the_miss_suggests_it(host, tools):
    client = host.client(host.key_a)
    suite_id = _suite_id()
    call = (tools["lookup"], {"customerId": "c-1", "region": "us"})
    entry = {"tool": tools["lookup"], "args": {"customerId": "c-1", "region": "eu"}, "response": ADA}
    # Given a recorded lookup for region eu, and an agent that now asks for region us
    exact = _register(host, suite_id, "1.0.0", [_task("region", [call], [entry])])
    before = tools["server"].count()
    # When it runs under the exact match
    missed = _report(host, run_eval(client, exact))["region"]
    # Then it misses, and anyOf with the call's value is among the rules that would have matched
    assert (missed["verdict"], missed["fixtureMissCount"]) == ("unverifiable", 1)
    assert missed["fixtureMisses"][0]["wouldMatchWith"] == {"ignore": ["/region"], "anyOf": {"/region": ["us"]}}
    # When one task lists us in anyOf and another lists only ca
    listed = _register(
        host,
        suite_id,
        "1.1.0",
        [
            _task("region", [call], [entry], fixtureMatching={"anyOf": {"/region": ["ca", "us"]}}),
            _task("unlisted", [call], [entry], fixtureMatching={"anyOf": {"/region": ["ca"]}}),
        ],
    )
    rows = _report(host, run_eval(client, listed))
    # Then the listed value is served the recorded answer and passes; the unlisted one still misses
    assert (rows["region"]["verdict"], rows["region"]["fixtureMissCount"], rows["region"]["liveToolCalls"]) == (
        "passed",
        0,
        0,
    )
    assert [c["provenance"] for c in rows["region"]["trialResults"][0]["toolCalls"]] == ["served"]
    assert (rows["unlisted"]["verdict"], rows["unlisted"]["fixtureMissCount"]) == ("unverifiable", 1)
    assert tools["server"].count() == before  # nothing went live


def test_a_task_rule_replaces_the_suites_and_tolerance_bounds_numbers(host, tools):
    client = host.client(host.key_a)
    suite_id = _suite_id()
    call = (tools["lookup"], {"customerId": "c-1", "amount": 10.4})
    entry = {"tool": tools["lookup"], "args": {"customerId": "c-1", "amount": 10}, "response": ADA}
    # Given a suite ignoring /at and a task of its own bounding /amount, and one bound too tight
    ref = _register(
        host,
        suite_id,
        "1.0.0",
        [
            _task("near", [call], [entry], fixtureMatching={"tolerance": {"/amount": 0.5}}),
            _task("far", [call], [entry], fixtureMatching={"tolerance": {"/amount": 0.1}}),
        ],
        fixtureMatching={"ignore": ["/amount"]},
    )
    rows = _report(host, run_eval(client, ref))
    # Then the task's bound decides: within it served, beyond it a miss naming the bound that would match
    assert (rows["near"]["verdict"], rows["near"]["fixtureMissCount"]) == ("passed", 0)
    assert rows["far"]["verdict"] == "unverifiable"
    assert rows["far"]["fixtureMisses"][0]["wouldMatchWith"]["tolerance"]["/amount"] == pytest.approx(0.4)


def test_live_read_only_goes_live_for_a_read_tool_and_never_for_an_effect_tool(host, tools):
    client = host.client(host.key_a)
    suite_id = _suite_id()
    ada = {"tool": tools["lookup"], "args": {"customerId": "c-1"}, "response": ADA}
    # Given a read-only lookup and a write tool, both missing their fixtures under onMiss live-read-only
    ref = _register(
        host,
        suite_id,
        "1.0.0",
        [
            _task("reads", [(tools["lookup"], {"customerId": "c-2"})], [ada], "live-read-only"),
            _task("writes", [(tools["ticket"], {"title": "refund"})], [ada], "live-read-only"),
        ],
    )
    lookups, tickets = tools["server"].count("/crm/lookup"), tools["server"].count("/tickets")
    rows = _report(host, run_eval(client, ref))
    # Then the lookup went live once (counted on the tool server, shown live, no miss)
    assert tools["server"].count("/crm/lookup") == lookups + 1
    reads = rows["reads"]
    assert (reads["verdict"], reads["fixtureMissCount"], reads["liveToolCalls"]) == ("passed", 0, 1)
    assert [(c["provenance"], c["status"]) for c in reads["trialResults"][0]["toolCalls"]] == [("live", "ok")]
    # and the write tool never left the host: a miss, fail-closed
    assert tools["server"].count("/tickets") == tickets
    writes = rows["writes"]
    assert (writes["verdict"], writes["fixtureMissCount"], writes["liveToolCalls"]) == ("unverifiable", 1, 0)
    assert [c["provenance"] for c in writes["trialResults"][0]["toolCalls"]] == ["refused"]


def _cli(host: Any, *args: str, key: str | None = None) -> int:
    from shared.local.commands import main

    return main(["eval", *args, "--endpoint", host.base_url, "--api-key", key or host.key_a])


def test_eval_accept_publishes_a_version_the_same_candidate_passes(host, tools, capsys):
    client = host.client(host.key_a)
    suite_id = _suite_id()
    # Given a suite whose task's agent now sends limit 2 where the recorded call had limit 1
    new_args = {"customerId": "c-1", "limit": 2}
    old = {"tool": tools["lookup"], "args": {"customerId": "c-1", "limit": 1}, "response": ADA}
    trajectory = {"match": "exact", "calls": [{"tool": tools["lookup"], "args": old["args"]}]}
    ref = _register(
        host,
        suite_id,
        "1.0.0",
        [
            _task("lookup", [(tools["lookup"], new_args)], [old], answer="found", trajectory=trajectory),
            _task("same", [], [], answer="same"),
        ],
    )
    assert _cli(host, "run", "--suite", ref, "--agent", AGENT, "--wait") == 2  # the miss: unverifiable
    capsys.readouterr()
    candidate = run_eval(client, ref)
    hits = tools["server"].count()
    # When the change is accepted
    assert _cli(host, "accept", candidate, "--json", "--reason", "the agent now asks for two") == 0
    published = json.loads(capsys.readouterr().out)
    # Then the next minor version is published, taking the new call with the answer the read tool gave when it was
    # called live, once, at accept time (decision 0146: never the old call's answer)
    assert published == {
        "suiteId": suite_id,
        "version": "1.1.0",
        "evalSuiteRef": f"{suite_id}@1.1.0",
        "taskCount": 2,
        "acceptedCount": 2,
        "accepted": [
            {"taskId": "lookup", "calls": [{"call": 0, "tool": tools["lookup"], "provenance": "accepted-live"}]},
            {"taskId": "same", "calls": []},
        ],
        "droppedTaskIds": [],
    }
    assert tools["server"].count() == hits + 1
    hits = tools["server"].count()
    doc = raw(host.base_url, "GET", f"{BASE}/eval-suites/{suite_id}/versions/1.1.0", key=host.key_a).json
    task = doc["tasks"][0]
    assert task["fixtures"] == {
        "toolResponses": [{"tool": tools["lookup"], "args": new_args, "argsMatch": "exact", "response": ADA}],
        "onMiss": "fail",
    }
    assert task["trajectory"] == {"match": "exact", "calls": [{"tool": tools["lookup"], "args": new_args}]}
    assert task["expected"] == {"kind": "golden", "match": {"strategy": "exact", "value": "found"}}
    # and the old version is unchanged (immutable)
    old_doc = raw(host.base_url, "GET", f"{BASE}/eval-suites/{suite_id}/versions/1.0.0", key=host.key_a).json
    assert old_doc["tasks"][0]["fixtures"]["toolResponses"] == [old]
    # and the same candidate now exits 0, served with no live hit
    assert _cli(host, "run", "--suite", published["evalSuiteRef"], "--agent", AGENT, "--wait", "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert [(t["taskId"], t["fixtureMissCount"]) for t in out["tasks"]] == [("lookup", 0), ("same", 0)]
    assert tools["server"].count() == hits


def _two_stamped(host: Any, tools: dict[str, Any]) -> tuple[str, list[tuple[str, Any]], list[dict[str, Any]], str]:
    """A suite of two tasks, ``stamp`` and ``other``, each missing its timestamped lookup, and an eval of it:
    (suiteId, calls, entries, the eval's run id)."""
    suite_id = _suite_id()
    calls, entries = _stamped(tools)
    ref = _register(host, suite_id, "1.0.0", [_task("stamp", calls, entries), _task("other", calls, entries)])
    return suite_id, calls, entries, run_eval(host.client(host.key_a), ref)


def test_eval_accept_with_task_through_the_cli_accepts_only_that_task(host, tools, capsys):
    suite_id, calls, entries, candidate = _two_stamped(host, tools)
    # When the CLI accepts one task of the run
    assert _cli(host, "accept", candidate, "--task", "stamp", "--reason", "timestamps move") == 0
    # Then it prints the new version's evalSuiteRef
    assert capsys.readouterr().out.strip() == f"{suite_id}@1.1.0"
    # and only that task takes the run's recorded call; the other keeps its old fixture
    doc = raw(host.base_url, "GET", f"{BASE}/eval-suites/{suite_id}/versions/1.1.0", key=host.key_a).json
    tasks = {t["taskId"]: t for t in doc["tasks"]}
    assert tasks["stamp"]["fixtures"]["toolResponses"] == [
        {"tool": tools["lookup"], "args": calls[0][1], "argsMatch": "exact", "response": ADA}
    ]
    assert tasks["other"] == _task("other", calls, entries)
    # and the same candidate against it: stamp is served, other still misses (exit 2)
    assert _cli(host, "run", "--suite", f"{suite_id}@1.1.0", "--agent", AGENT, "--wait", "--json") == 2
    out = json.loads(capsys.readouterr().out)
    assert [(t["taskId"], t["fixtureMissCount"]) for t in out["tasks"]] == [("stamp", 0), ("other", 1)]
    # When a task the run does not have is named, Then exit 3 with one error line and no new version
    assert _cli(host, "accept", candidate, "--task", "nope", "--reason", "timestamps move") == 3
    assert capsys.readouterr().err.startswith("error: ")
    assert raw(host.base_url, "GET", f"{BASE}/eval-suites/{suite_id}", key=host.key_a).json["versions"] == [
        "1.0.0",
        "1.1.0",
    ]


def test_accept_of_one_task_leaves_the_others_and_refuses_foreign_runs_with_one_answer(host, tools, capsys):
    suite_id, calls, entries, candidate = _two_stamped(host, tools)
    path = f"{BASE}/eval-suites/{suite_id}:accept"
    # When only one task is accepted
    why = "timestamps move"
    r = raw(host.base_url, "POST", path, {"runId": candidate, "taskIds": ["stamp"], "reason": why}, key=host.key_a)
    assert r.status == 201, r.text
    assert (r.json["version"], r.json["acceptedCount"]) == ("1.1.0", 1)
    doc = raw(host.base_url, "GET", f"{BASE}/eval-suites/{suite_id}/versions/1.1.0", key=host.key_a).json
    assert doc["tasks"][0]["fixtures"]["toolResponses"][0]["args"] == calls[0][1]
    assert doc["tasks"][1] == _task("other", calls, entries)
    # Then tenant B accepting A's run, an unknown run and a malformed id get the same bytes
    foreign = raw(host.base_url, "POST", path, {"runId": candidate, "reason": why}, key=host.key_b)
    unknown = raw(host.base_url, "POST", path, {"runId": candidate[:-4] + "zzzz", "reason": why}, key=host.key_a)
    malformed = raw(host.base_url, "POST", path, {"runId": "nope", "reason": why}, key=host.key_a)
    assert foreign.status == unknown.status == malformed.status == 400
    assert foreign.json["error"] == "validation_error"
    assert foreign.text == unknown.text == malformed.text
    assert candidate not in foreign.text
    # and an unknown task or a bad body is a 400 that writes nothing
    bad = raw(host.base_url, "POST", path, {"runId": candidate, "taskIds": ["nope"], "reason": why}, key=host.key_a)
    assert (bad.status, bad.json["error"]) == (400, "validation_error")
    assert raw(host.base_url, "POST", path, {"run": candidate, "reason": why}, key=host.key_a).status == 400
    assert raw(host.base_url, "GET", f"{BASE}/eval-suites/{suite_id}", key=host.key_a).json["versions"] == [
        "1.0.0",
        "1.1.0",
    ]
