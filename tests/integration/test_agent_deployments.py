"""RFC 0082 deployments through openwop-client: the seven-state records, the eval promotion gate
(``eval_gate_unmet`` for a regressed, unverifiable, missing or foreign eval, or one of another version), channels
resolved once per run and recorded, rollback and pause."""

from __future__ import annotations

import json
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
    body = {
        "version": version,
        "model": {"provider": "mock", "model": "m", "mockProvider": {"script": [{"text": answer}]}},
        "manifest": {
            "agentId": agent_id,
            "persona": "Answerer",
            "modelClass": "general",
            "systemPrompt": f"answer {version}",
        },
    }
    r = raw(host.base_url, "POST", f"{BASE}/agents", body, key=host.key_a)
    assert r.status == 201, r.text


def _agent_with_evals(host: Any) -> tuple[str, dict[str, str]]:
    """An agent with 1.0.0 (right), 2.0.0 (right, reworded prompt) and 3.0.0 (wrong), a suite, and evals."""
    org = "d" + uuid.uuid4().hex[:8]
    agent_id = f"{org}.answerer"
    for version, answer in (("1.0.0", "42"), ("2.0.0", "42"), ("3.0.0", "41")):
        _register(host, agent_id, version, answer)
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
    client = host.client(host.key_a)

    def evaluate(version: str, **kw: Any) -> str:
        run = client.runs_create(
            eval_request(
                f"{suite}@1.0.0",
                agentId=agent_id,
                configurable={"version": 1, "extensions": {"openwop-serverless": {"agentVersion": version}}},
                **kw,
            )
        )
        assert wait_terminal(client, run.runId).status == "completed"
        return str(run.runId)

    evals = {"v1": evaluate("1.0.0", evalModes=["golden"])}
    evals["v2"] = evaluate("2.0.0", evalModes=["golden", "regression"], baselineRunId=evals["v1"])
    evals["v3"] = evaluate("3.0.0", evalModes=["golden", "regression"], baselineRunId=evals["v1"])
    return agent_id, evals


@pytest.fixture(scope="module")
def agent(host):
    return _agent_with_evals(host)


def _promote(client: Any, agent_id: str, version: str, **kw: Any) -> Any:
    return client.agents_transition_deployment(
        agent_id, AgentDeploymentTransition(version=version, transition=kw.pop("transition", "promote"), **kw)
    )


def _channel_run(host: Any, agent_id: str, channel: str | None, version: str | None = None) -> Any:
    """A run of a one-node workflow naming the agent by ``channel``, by ``version``, or (neither) by id alone."""
    n = node("agent", "core.agent", inputs={"input": static("What is six times seven?")})
    n["agent"] = {
        "agentId": agent_id,
        **({"channel": channel} if channel else {}),
        **({"version": version} if version else {}),
    }
    wid = f"wf-{uuid.uuid4().hex[:10]}"
    r = raw(host.base_url, "POST", f"{BASE}/workflows", definition(wid, [n]), key=host.key_a)
    assert r.status == 201, r.text
    return raw(host.base_url, "POST", "/runs", {"workflowId": wid}, key=host.key_a)


def test_the_promotion_gate_channels_rollback_and_pause(host, agent):
    agent_id, evals = agent
    client = host.client(host.key_a)
    listed = client.agents_list_deployments(agent_id)
    assert [(d.version, d.state) for d in listed] == [("1.0.0", "draft"), ("2.0.0", "draft"), ("3.0.0", "draft")]

    # No evidence, a regressed eval, an eval of another version, a foreign or malformed id: each refused, with its
    # reasons (decision 0147); the ids that are no eval of the caller's (foreign, malformed) read the same bytes
    refusals = []
    for kw in (
        {},
        {"evalRunId": evals["v3"]},
        {"evalRunId": evals["v1"]},
        {"evalRunId": "tenant-b/r-zz"},
        {"evalRunId": "garbage"},
    ):
        body = {
            "version": "3.0.0" if kw.get("evalRunId") == evals["v3"] else "2.0.0",
            "transition": "promote",
            "toState": "active",
            **kw,
        }
        r = raw(host.base_url, "POST", f"/agents/{agent_id}/deployments", body, key=host.key_a)
        assert r.status == 422 and r.json["error"] == "eval_gate_unmet", r.text
        refusals.append(r.text)
    assert refusals[3] == refusals[4]
    reasons = [[(x["code"], x.get("tasks")) for x in json.loads(t)["details"]["reasons"]] for t in refusals]
    assert reasons == [
        [("no_evidence", None)],
        [("not_passed", ["q"]), ("regressed", ["q"]), ("score_fell", None)],
        [("wrong_version", None)],
        [("not_found", None)],
        [("not_found", None)],
    ]
    assert "evaluated version 1.0.0, not 2.0.0" in json.loads(refusals[2])["details"]["reasons"][0]["message"]
    assert "tenant-b" not in refusals[3] and "garbage" not in refusals[4]
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
    canary = raw(
        host.base_url,
        "POST",
        f"/agents/{agent_id}/deployments",
        {"version": "1.0.0", "transition": "adjust-canary", "canaryPercent": 50},
        key=host.key_a,
    )
    assert canary.status == 400 and canary.json["error"] == "validation_error"

    # Another tenant sees no such agent
    foreign = raw(host.base_url, "GET", f"/agents/{agent_id}/deployments", key=host.key_b)
    unknown = raw(host.base_url, "GET", "/agents/x.nobody/deployments", key=host.key_b)
    assert foreign.status == unknown.status == 404 and foreign.text == unknown.text


def _resolved(host: Any, agent_id: str, version: str | None = None) -> str:
    """The version an unpinned (or ``version``-pinned) run of the agent recorded on agent.invocation-started."""
    client = host.client(host.key_a)
    created = _channel_run(host, agent_id, None, version)
    assert created.status == 201, created.text
    run_id = created.json["runId"]
    assert wait_terminal(client, run_id).status == "completed"
    started = [e.payload for e in all_events(client, run_id) if e.type == "agent.invocation-started"][0]
    assert "resolvedChannel" not in started  # the ref bound no channel
    return str(started["resolvedAgentVersion"])


def _history(host: Any, agent_id: str, key: str | None = None) -> Any:
    return raw(host.base_url, "GET", f"{BASE}/agents/{agent_id}/deployments/stable/history", key=key or host.key_a)


def _rollback(host: Any, agent_id: str, key: str | None = None, channel: str = "stable") -> Any:
    return raw(host.base_url, "POST", f"{BASE}/agents/{agent_id}/deployments/{channel}:rollback", key=key or host.key_a)


def test_an_unpinned_reference_follows_stable_and_rollback_returns_the_previous_one(host):
    # Given an agent with three registered versions (3.0.0 answers wrong) and an eval of each, nothing deployed
    agent_id, evals = _agent_with_evals(host)
    client = host.client(host.key_a)
    # Then an unpinned reference takes the newest registered version (the agent has no deployment at all)
    assert _resolved(host, agent_id) == "3.0.0"

    # When 1.0.0 is promoted to stable with its clean eval and the regressed 3.0.0 deployed only to test
    _promote(client, agent_id, "1.0.0", toState="active", evalRunId=evals["v1"])
    assert _promote(client, agent_id, "3.0.0", toState="test").state == "test"
    # Then the unpinned reference runs stable's 1.0.0, and only a pin reaches 3.0.0
    assert _resolved(host, agent_id) == "1.0.0"
    assert _resolved(host, agent_id, "3.0.0") == "3.0.0"

    # When 2.0.0 takes stable, an unpinned run follows it; the history lists both changes with their evidence
    _promote(client, agent_id, "2.0.0", toState="active", evalRunId=evals["v2"])
    assert _resolved(host, agent_id) == "2.0.0"
    got = _history(host, agent_id)
    assert got.status == 200, got.text
    assert got.json["agentId"] == agent_id and got.json["channel"] == "stable"
    rows = got.json["history"]
    assert [(h["version"], h["evalRunId"]) for h in rows] == [("1.0.0", evals["v1"]), ("2.0.0", evals["v2"])]
    assert all(h["at"].endswith("Z") and h["keyId"] for h in rows) and rows[0]["at"] <= rows[1]["at"]

    # When stable is rolled back
    back = _rollback(host, agent_id)
    # Then it serves 1.0.0 again, 2.0.0 is rolled back (the official record says so), and unpinned runs follow
    assert back.status == 200, back.text
    assert back.json == {"agentId": agent_id, "channel": "stable", "version": "1.0.0", "rolledBackVersion": "2.0.0"}
    states = {d.version: (d.state, d.channels, d.rollbackPointer) for d in client.agents_list_deployments(agent_id)}
    assert states["1.0.0"] == ("active", ["stable"], None) and states["2.0.0"] == ("rolled-back", None, "1.0.0")
    assert _resolved(host, agent_id) == "1.0.0"
    assert [h["version"] for h in _history(host, agent_id).json["history"]] == ["1.0.0", "2.0.0", "1.0.0"]

    # When it is rolled back again: nothing earlier is still active, a 409 and nothing written
    again = _rollback(host, agent_id)
    assert again.status == 409 and again.json["error"] == "openwop-serverless.no_previous_deployment", again.text
    assert len(_history(host, agent_id).json["history"]) == 3
    assert _resolved(host, agent_id) == "1.0.0"

    # When stable is paused, the history records the channel serving nothing, and unpinned runs are refused
    _promote(client, agent_id, "1.0.0", transition="pause")
    assert _history(host, agent_id).json["history"][-1]["version"] is None
    refused = _channel_run(host, agent_id, None)
    assert refused.status == 400 and refused.json["error"] == "no_active_deployment", refused.text

    # A channel this host does not assign is a 400; canary, never deployed, has nothing to roll back
    for bad in ("latest", "nope"):
        r = _rollback(host, agent_id, channel=bad)
        assert r.status == 400 and r.json["error"] == "validation_error", r.text
    assert _rollback(host, agent_id, channel="canary").status == 409


def test_the_channel_routes_answer_another_tenant_as_an_unknown_agent(host, agent):
    # Given tenant A's agent
    agent_id, _ = agent
    # When tenant B reads its history or rolls it back, and asks the same of an id nobody has
    answers = [
        (_history(host, agent_id, host.key_b), _history(host, "x.nobody", host.key_b)),
        (_rollback(host, agent_id, host.key_b), _rollback(host, "x.nobody", host.key_b)),
    ]
    # Then each pair is the same 404, byte for byte, and tenant A's channel is untouched
    for foreign, unknown in answers:
        assert foreign.status == unknown.status == 404 and foreign.text == unknown.text
    assert _history(host, agent_id).status == 200
