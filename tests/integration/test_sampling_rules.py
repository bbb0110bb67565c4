"""Sampling rules (issue 24 part 4): completed production runs become draft tasks through the events stream on moto
(no scan, no poll); forks, replays and eval runs never do; the sample is deterministic per run id; ``maxTasks``
caps the draft; ``:publish`` turns it into a version. Bad input is the protocol's envelope and writes nothing."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from openwop_client.types import CreateRunRequest

from shared.local.ddb_streams import wait_for_stream_idle
from shared.protocol.ids import project_id
from shared.services.suite_runs import sampled, task_id_for
from tests.helpers import ports as _ports
from tests.wire import raw, wait_terminal
from tests.workflows import register_lookup_tool, register_scripted_agent

BASE = "/host/openwop-serverless"
SUITES = f"{BASE}/eval-suites"
AGENT = "conformance-eval-agent"


def _suite_id() -> str:
    return f"tests.local.evals.r{uuid.uuid4().hex[:10]}"


def _runs(client: Any, workflow_id: str, tool_id: str, n: int, tag: str = "r") -> list[str]:
    out = []
    for i in range(n):
        script = {"calls": [{"tool": tool_id, "args": {"customerId": f"{tag}-{i}"}}], "answer": f"{tag}-answer-{i}"}
        out.append(client.runs_create(CreateRunRequest(workflowId=workflow_id, inputs={"script": script})).runId)
    for run_id in out:
        assert wait_terminal(client, run_id, timeout=120).status == "completed"
    return out


def _rule(host: Any, suite_id: str, body: dict[str, Any], key: str | None = None) -> Any:
    return raw(host.base_url, "POST", f"{SUITES}/{suite_id}/rules", body, key=key or host.key_a)


def _draft(host: Any, suite_id: str, key: str | None = None) -> Any:
    return raw(host.base_url, "GET", f"{SUITES}/{suite_id}/draft", key=key or host.key_a)


def _settled_draft(host: Any, suite_id: str, key: str | None = None) -> dict[str, Any]:
    """The draft once the events stream has delivered everything stored so far (bounded wait)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if wait_for_stream_idle(timeout=5.0):
            break
    r = _draft(host, suite_id, key)
    assert r.status == 200, r.text
    return r.json


@pytest.fixture(scope="module")
def tool(host, server):
    return register_lookup_tool(host, server[1])


def test_a_rule_samples_exactly_the_matching_completed_production_runs(host, tool):
    client = host.client(host.key_a)
    suite_id = _suite_id()
    sampled_wf = register_scripted_agent("tenant-a", "sampled")
    other_wf = register_scripted_agent("tenant-a", "unsampled")
    # Given a rule on tenant A's suite for the agent's runs of one workflow
    r = _rule(host, suite_id, {"agentId": AGENT, "filter": {"workflowId": sampled_wf}, "sampleRate": 1, "maxTasks": 50})
    assert r.status == 201, r.text
    rule = r.json
    assert (rule["suiteId"], rule["agentId"], rule["filter"], rule["sampleRate"], rule["maxTasks"]) == (
        suite_id,
        AGENT,
        {"workflowId": sampled_wf},
        1,
        50,
    )
    listed = raw(host.base_url, "GET", f"{SUITES}/{suite_id}/rules", key=host.key_a)
    assert listed.status == 200 and listed.json == {"rules": [rule]}
    # When three runs of that workflow complete, one run of another workflow completes, and one matching run is
    # forked (branch and replay) and evaluated
    runs = _runs(client, sampled_wf, tool, 3)
    _runs(client, other_wf, tool, 1, tag="o")
    for mode, seq in (("branch", 2), ("replay", 2)):
        f = raw(
            host.base_url,
            "POST",
            f"/runs/{project_id(runs[0]).replace('/', '~2F')}:fork",
            {"mode": mode, "fromSeq": seq},
            key=host.key_a,
        )
        assert f.status == 201, f.text
        assert wait_terminal(client, f.json["runId"], timeout=120).status in ("completed", "failed")
    draft = _settled_draft(host, suite_id)
    # Then the draft holds exactly the three matching runs, each the task :from-runs builds
    assert draft["taskCount"] == 3 and draft["targetAgentId"] == AGENT
    assert sorted(t["sourceRunId"] for t in draft["tasks"]) == sorted(runs)
    first = next(t for t in draft["tasks"] if t["sourceRunId"] == runs[0])
    # labelled as :from-runs labels a task: the run's input, simple values first
    assert first.pop("extensions")["openwop-serverless"]["label"].startswith("answer=r-answer-0, calls=[")
    assert first == {
        "taskId": task_id_for(runs[0]),
        "input": {"calls": [{"tool": tool, "args": {"customerId": "r-0"}}], "answer": "r-answer-0"},
        "expected": {"kind": "golden", "match": {"strategy": "exact", "value": "r-answer-0"}},
        "sourceRunId": runs[0],
    }
    # When the draft is published and evaluated (an eval run of the agent completes too)
    p = raw(host.base_url, "POST", f"{SUITES}/{suite_id}:publish", {}, key=host.key_a)
    assert p.status == 201, p.text
    assert p.json == {
        "suiteId": suite_id,
        "version": "1.0.0",
        "evalSuiteRef": f"{suite_id}@1.0.0",
        "taskCount": 3,
        "addedCount": 3,
    }
    ev = client.runs_create(CreateRunRequest(mode="eval", evalSuiteRef=f"{suite_id}@1.0.0", agentId=AGENT))
    assert wait_terminal(client, ev.runId, timeout=180).status == "completed"
    # Then the version holds the tasks, the draft is empty, and the eval run was not sampled into it
    doc = raw(host.base_url, "GET", f"{SUITES}/{suite_id}/versions/1.0.0", key=host.key_a).json
    assert sorted(t["sourceRunId"] for t in doc["tasks"]) == sorted(runs)
    assert _settled_draft(host, suite_id) == {"suiteId": suite_id, "taskCount": 0, "tasks": [], "targetAgentId": AGENT}
    # and an empty draft publishes nothing
    again = raw(host.base_url, "POST", f"{SUITES}/{suite_id}:publish", {}, key=host.key_a)
    assert (again.status, again.json["error"]) == (400, "validation_error")


def test_the_sample_is_deterministic_per_run_id_and_max_tasks_caps_the_draft(host, tool):
    client = host.client(host.key_a)
    suite_id, capped_id = _suite_id(), _suite_id()
    wf = register_scripted_agent("tenant-a", "sample")
    # Given a half-rate rule and, on another suite, a rule capped at two tasks
    half = _rule(host, suite_id, {"agentId": AGENT, "filter": {"workflowId": wf}, "sampleRate": 0.5}).json
    assert _rule(host, capped_id, {"agentId": AGENT, "filter": {"workflowId": wf}, "maxTasks": 2}).status == 201
    # When ten runs complete
    runs = _runs(client, wf, tool, 10, tag="s")
    # Then the half-rate draft holds exactly the runs its hash selects, and the capped one two of them
    expected = sorted(r for r in runs if sampled(half["ruleId"], r, 0.5))
    assert 0 < len(expected) < 10
    assert sorted(t["sourceRunId"] for t in _settled_draft(host, suite_id)["tasks"]) == expected
    capped = _settled_draft(host, capped_id)
    assert capped["taskCount"] == 2 and {t["sourceRunId"] for t in capped["tasks"]} <= set(runs)
    # When the rule is deleted, later runs are not sampled
    d = raw(host.base_url, "DELETE", f"{SUITES}/{suite_id}/rules/{half['ruleId']}", key=host.key_a)
    assert d.status == 204
    later = _runs(client, wf, tool, 4, tag="l")
    assert not {t["sourceRunId"] for t in _settled_draft(host, suite_id)["tasks"]} & set(later)


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"agentId": ""},
        {"agentId": AGENT, "sampleRate": 0},
        {"agentId": AGENT, "sampleRate": 1.5},
        {"agentId": AGENT, "maxTasks": 0},
        {"agentId": AGENT, "maxTasks": 501},
        {"agentId": AGENT, "extra": 1},
        {"agentId": AGENT, "filter": {"status": "failed"}},
        [AGENT],
    ],
)
def test_bad_rules_are_400_and_write_nothing(host, body):
    suite_id = _suite_id()
    # When a malformed rule is registered
    r = _rule(host, suite_id, body)
    # Then it is the protocol's 400 envelope, and the suite has no rule
    assert (r.status, r.json["error"]) == (400, "validation_error"), r.text
    assert _ports().host.query("SUITERULE#tenant-a", f"{suite_id}#") == []


def test_rules_and_drafts_are_isolated_with_identical_404s(host):
    suite_id = _suite_id()
    # Given tenant A's rule
    rule = _rule(host, suite_id, {"agentId": AGENT}).json
    # Then tenant B neither reads its draft or rules nor deletes the rule: the bytes of an unknown suite or rule
    unknown = _draft(host, _suite_id())
    assert unknown.status == 404
    assert _draft(host, suite_id, key=host.key_b).text == unknown.text
    assert raw(host.base_url, "GET", f"{SUITES}/bad/draft", key=host.key_a).text == unknown.text
    gone = raw(host.base_url, "DELETE", f"{SUITES}/{suite_id}/rules/01ARZ3NDEKTSV4RRFFQ69G5FAV", key=host.key_a)
    foreign = raw(host.base_url, "DELETE", f"{SUITES}/{suite_id}/rules/{rule['ruleId']}", key=host.key_b)
    malformed = raw(host.base_url, "DELETE", f"{SUITES}/{suite_id}/rules/x", key=host.key_a)
    assert gone.status == 404 and foreign.text == gone.text == malformed.text
    assert raw(host.base_url, "GET", f"{SUITES}/{suite_id}/rules", key=host.key_a).json == {"rules": [rule]}
    # and a second rule for another agent on the same suite is refused
    other = _rule(host, suite_id, {"agentId": "another-agent"})
    assert (other.status, other.json["error"]) == (400, "validation_error")


def test_a_run_completing_right_after_a_rule_is_sampled_where_no_rule_was_cached(host):
    from shared.services import auth, stream_interest

    ports = _ports()
    tenant = f"tenant-{uuid.uuid4().hex[:10]}"
    key, _ = auth.create_api_key(ports, tenant, "sampling-freshness")
    wf = register_scripted_agent(tenant, "fresh")
    client = host.client(key)
    suite_id = _suite_id()
    # Given a fan-out process that has just read the tenant (no webhook, no rule) and keeps that answer
    assert stream_interest.read(ports, tenant) == stream_interest.Interest([], None)
    cached = stream_interest._NO_SUBSCRIBERS[tenant]
    assert stream_interest.read(ports, tenant) == stream_interest.Interest([], None)
    assert stream_interest._NO_SUBSCRIBERS[tenant] == cached  # the second answer was the kept one
    # When a rule is registered and a run of the agent starts as soon as the 201 arrives
    r = _rule(host, suite_id, {"agentId": AGENT, "filter": {"workflowId": wf}}, key=key)
    assert r.status == 201, r.text
    # (the kept answer is no longer usable once the 201 arrives: the run's fan-out reads the tenant again)
    assert ports.clock.now_ms() - cached[0] >= stream_interest.NO_SUBSCRIBER_CACHE_S * 1000
    script = {"calls": [{"tool": "conformance.eval:echo", "args": {"n": 1}}], "answer": "fresh"}
    run = client.runs_create(CreateRunRequest(workflowId=wf, inputs={"script": script})).runId
    assert wait_terminal(client, run, timeout=120).status == "completed"
    # Then that run is in the draft
    assert [t["sourceRunId"] for t in _settled_draft(host, suite_id, key=key)["tasks"]] == [run]
    # and the same holds the other way: a deletion outlasts the answer just kept with the rule in it
    version = stream_interest.read(ports, tenant).rules_version
    assert version is not None and stream_interest.read(ports, tenant).rules_version == version
    d = raw(host.base_url, "DELETE", f"{SUITES}/{suite_id}/rules/{r.json['ruleId']}", key=key)
    assert d.status == 204
    assert stream_interest.read(ports, tenant).rules_version not in (None, version)
    later = client.runs_create(CreateRunRequest(workflowId=wf, inputs={"script": script})).runId
    assert wait_terminal(client, later, timeout=120).status == "completed"
    assert [t["sourceRunId"] for t in _settled_draft(host, suite_id, key=key)["tasks"]] == [run]
