"""RFC 0082 deployments through openwop-client: the seven-state records, the eval promotion gate
(``eval_gate_unmet`` for a regressed, unverifiable, missing or foreign eval, or one of another version), channels
resolved once per run and recorded, rollback and pause."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from openwop_client import WopError
from openwop_client.types import AgentDeploymentTransition

from tests.integration.test_eval_runs import eval_request, golden, put_suite
from tests.wire import all_events, raw, wait_terminal
from tests.workflows import definition, node, static

BASE = "/host/openwop-serverless"


def _register(host: Any, agent_id: str, version: str, answer: str) -> None:
    body = {"version": version, "model": {"provider": "mock", "model": "m", "mockProvider": {"script": [
        {"text": answer}]}}, "manifest": {"agentId": agent_id, "persona": "Answerer", "modelClass": "general",
                                          "systemPrompt": f"answer {version}"}}
    r = raw(host.base_url, "POST", f"{BASE}/agents", body, key=host.key_a)
    assert r.status == 201, r.text


@pytest.fixture(scope="module")
def agent(host):
    """An agent with 1.0.0 (right), 2.0.0 (right, reworded prompt) and 3.0.0 (wrong), a suite, and evals."""
    org = "d" + uuid.uuid4().hex[:8]
    agent_id = f"{org}.answerer"
    for version, answer in (("1.0.0", "42"), ("2.0.0", "42"), ("3.0.0", "41")):
        _register(host, agent_id, version, answer)
    suite = f"tests.{org}.evals.answer"
    assert put_suite(host, host.key_a, {
        "suiteId": suite, "version": "1.0.0", "modes": ["golden", "regression"], "targetAgentId": agent_id,
        "tasks": [{"taskId": "q", "input": "What is six times seven?", "expected": golden("42")}]}).status == 201
    client = host.client(host.key_a)

    def evaluate(version: str, **kw: Any) -> str:
        run = client.runs_create(eval_request(f"{suite}@1.0.0", agentId=agent_id, configurable={
            "version": 1, "extensions": {"openwop-serverless": {"agentVersion": version}}}, **kw))
        assert wait_terminal(client, run.runId).status == "completed"
        return str(run.runId)

    evals = {"v1": evaluate("1.0.0", evalModes=["golden"])}
    evals["v2"] = evaluate("2.0.0", evalModes=["golden", "regression"], baselineRunId=evals["v1"])
    evals["v3"] = evaluate("3.0.0", evalModes=["golden", "regression"], baselineRunId=evals["v1"])
    return agent_id, evals


def _promote(client: Any, agent_id: str, version: str, **kw: Any) -> Any:
    return client.agents_transition_deployment(agent_id, AgentDeploymentTransition(
        version=version, transition=kw.pop("transition", "promote"), **kw))


def _channel_run(host: Any, agent_id: str, channel: str) -> Any:
    n = node("agent", "core.agent", inputs={"input": static("What is six times seven?")})
    n["agent"] = {"agentId": agent_id, "channel": channel}
    wid = f"wf-{uuid.uuid4().hex[:10]}"
    r = raw(host.base_url, "POST", f"{BASE}/workflows", definition(wid, [n]), key=host.key_a)
    assert r.status == 201, r.text
    return raw(host.base_url, "POST", "/runs", {"workflowId": wid}, key=host.key_a)


def test_the_promotion_gate_channels_rollback_and_pause(host, agent):
    agent_id, evals = agent
    client = host.client(host.key_a)
    listed = client.agents_list_deployments(agent_id)
    assert [(d.version, d.state) for d in listed] == [("1.0.0", "draft"), ("2.0.0", "draft"), ("3.0.0", "draft")]

    # No evidence, a regressed eval, an eval of another version, a foreign or malformed id: the same refusal
    refusals = []
    for kw in ({}, {"evalRunId": evals["v3"]}, {"evalRunId": evals["v1"]}, {"evalRunId": "tenant-b/r-zz"},
               {"evalRunId": "garbage"}):
        body = {"version": "3.0.0" if kw.get("evalRunId") == evals["v3"] else "2.0.0", "transition": "promote",
                "toState": "active", **kw}
        r = raw(host.base_url, "POST", f"/agents/{agent_id}/deployments", body, key=host.key_a)
        assert r.status == 422 and r.json["error"] == "eval_gate_unmet", r.text
        refusals.append(r.text)
    assert len(set(refusals)) == 1
    # A channel nothing serves yet
    refused = _channel_run(host, agent_id, "stable")
    assert refused.status == 400 and refused.json["error"] == "no_active_deployment"

    # Version 1 with its own clean eval, then version 2 with an unchanged one
    d1 = _promote(client, agent_id, "1.0.0", toState="active", evalRunId=evals["v1"])
    assert (d1.state, d1.channels, d1.evalRunId) == ("active", ["stable"], evals["v1"])
    with pytest.raises(WopError) as err:
        _promote(client, agent_id, "2.0.0", toState="staged")
    assert err.value.status == 422
    d2 = _promote(client, agent_id, "2.0.0", toState="active", evalRunId=evals["v2"])
    assert d2.state == "active" and d2.channels == ["stable"]
    states = {d.version: (d.state, d.channels) for d in client.agents_list_deployments(agent_id)}
    assert states["1.0.0"] == ("active", None) and states["2.0.0"] == ("active", ["stable"])

    # A run bound to the channel resolves it once and records what it got
    created = _channel_run(host, agent_id, "stable")
    assert created.status == 201, created.text
    run_id = created.json["runId"]
    assert wait_terminal(client, run_id).status == "completed"
    started = [e.payload for e in all_events(client, run_id) if e.type == "agent.invocation-started"][0]
    assert (started["resolvedAgentVersion"], started["resolvedChannel"]) == ("2.0.0", "stable")

    # Roll version 2 back: version 1 serves the channel again
    rolled = _promote(client, agent_id, "2.0.0", transition="rollback", reason="latency")
    assert (rolled.state, rolled.rollbackPointer) == ("rolled-back", "1.0.0")
    again = _channel_run(host, agent_id, "stable").json["runId"]
    wait_terminal(client, again)
    started = [e.payload for e in all_events(client, again) if e.type == "agent.invocation-started"][0]
    assert started["resolvedAgentVersion"] == "1.0.0"
    latest = _channel_run(host, agent_id, "latest")
    assert latest.status == 201

    # Pause it: nothing serves "stable"; adjust-canary is not offered
    assert _promote(client, agent_id, "1.0.0", transition="pause").state == "paused"
    assert _channel_run(host, agent_id, "stable").json["error"] == "no_active_deployment"
    canary = raw(host.base_url, "POST", f"/agents/{agent_id}/deployments",
                 {"version": "1.0.0", "transition": "adjust-canary", "canaryPercent": 50}, key=host.key_a)
    assert canary.status == 400 and canary.json["error"] == "validation_error"

    # Another tenant sees no such agent
    foreign = raw(host.base_url, "GET", f"/agents/{agent_id}/deployments", key=host.key_b)
    unknown = raw(host.base_url, "GET", "/agents/x.nobody/deployments", key=host.key_b)
    assert foreign.status == unknown.status == 404 and foreign.text == unknown.text
