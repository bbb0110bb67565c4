"""A model-backed agent on the OpenAI-compatible provider, against a real loopback chat-completions server:
the tenant's credential reaches the provider (and nothing else does), a task killed after the model-call log
write is retried without a second model call, provider errors become the run's error codes, and a cancelled run
sends no model call."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from openwop_client.types import CreateRunRequest

from tests.chat_server import ScriptedChatServer, completion
from tests.faults import kill_after_write
from tests.integration.test_model_agents import BASE, _ports, agent_workflow
from tests.wire import all_events, raw, wait_terminal

SECRET = "sk-tenant-a-" + uuid.uuid4().hex


def _agent(
    host: Any, url: str, *, credential: str | None = None, tools: list[str] | None = None, max_turns: int = 4
) -> str:
    agent_id = f"o{uuid.uuid4().hex[:8]}.helper"
    model: dict[str, Any] = {"provider": "openai", "model": "gpt-test", "baseUrl": url, "temperature": 0.2}
    if credential:
        model["credentialRef"] = credential
    body = {
        "version": "1.0.0",
        "maxTurns": max_turns,
        "model": model,
        "manifest": {
            "agentId": agent_id,
            "persona": "Helper",
            "modelClass": "general",
            "systemPrompt": "You help.",
            "toolAllowlist": tools or [],
        },
    }
    r = raw(host.base_url, "POST", f"{BASE}/agents", body, key=host.key_a)
    assert r.status == 201, r.text
    return agent_id


@pytest.fixture
def chat():
    s = ScriptedChatServer()
    s.start()
    yield s
    s.stop()


def test_the_tenant_credential_reaches_the_provider_and_no_event(host, chat):
    ref = "llm-" + uuid.uuid4().hex[:6]
    r = raw(
        host.base_url,
        "PUT",
        f"{BASE}/credentials/{ref}",
        {"credential": {"type": "bearer", "token": SECRET}},
        key=host.key_a,
    )
    assert r.status in (200, 201), r.text
    chat.answers = [(200, completion("hello there", usage=(21, 4)), {})]
    agent_id = _agent(host, chat.url, credential=ref)
    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId=agent_workflow(host, agent_id)))
    assert wait_terminal(client, run.runId).status == "completed"
    assert len(chat.requests) == 1
    sent = chat.requests[0]
    assert sent["headers"]["authorization"] == f"Bearer {SECRET}"
    assert sent["body"]["model"] == "gpt-test" and sent["body"]["temperature"] == 0.2
    assert sent["body"]["messages"][0] == {"role": "system", "content": "You help."}
    events = all_events(client, run.runId)
    usage = [e.payload for e in events if e.type == "provider.usage"]
    assert usage == [
        {
            "provider": "openai",
            "model": "gpt-test-1",
            "inputTokens": 21,
            "outputTokens": 4,
            "totalTokens": 25,
            **({"costEstimateUsd": usage[0]["costEstimateUsd"]} if "costEstimateUsd" in usage[0] else {}),
        }
    ]
    stored = json.dumps([e.payload for e in events]) + json.dumps(_ports().runs.query_aux(run.runId, "MCALL#"))
    assert SECRET not in stored
    # Another tenant cannot bind the credential: it is not theirs.
    body = {
        "version": "1.0.0",
        "model": {"provider": "openai", "model": "m", "baseUrl": chat.url, "credentialRef": ref},
        "manifest": {
            "agentId": f"o{uuid.uuid4().hex[:8]}.x",
            "persona": "X",
            "modelClass": "general",
            "systemPrompt": "x",
        },
    }
    other = raw(host.base_url, "POST", f"{BASE}/agents", body, key=host.key_b)
    assert other.status == 403 and other.json["error"] == "credential_forbidden"


def test_a_task_killed_after_the_model_call_is_logged_never_calls_the_model_again(host, chat):
    marker = "answer-" + uuid.uuid4().hex
    chat.answers = [(200, completion(marker), {})]
    agent_id = _agent(host, chat.url)
    client = host.client(host.key_a)
    wid = agent_workflow(host, agent_id)
    with kill_after_write(_ports().runs._c, {marker: 1}) as got:
        run = client.runs_create(CreateRunRequest(workflowId=wid))
        snap = wait_terminal(client, run.runId, timeout=60)
    assert got.crashed == 1 and snap.status == "completed"
    assert len(chat.requests) == 1  # the retried task found the logged answer
    decided = [e.payload for e in all_events(client, run.runId) if e.type == "agent.decided"]
    assert decided == [{"agentId": agent_id, "decision": marker}]


def test_provider_errors_fail_the_node_with_the_spec_code(host, chat):
    chat.answers = [(429, {"error": {"message": "slow down"}}, {"Retry-After": "0"})] * 3
    agent_id = _agent(host, chat.url)
    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId=agent_workflow(host, agent_id)))
    assert wait_terminal(client, run.runId).status == "failed"
    assert len(chat.requests) == 3  # MODEL_CALL_ATTEMPTS, then the node fails
    events = all_events(client, run.runId)
    failed = [e.payload for e in events if e.type == "node.failed"]
    assert failed[0]["error"]["code"] == "rate_limited" and "slow down" not in json.dumps(failed)
    assert [e.payload["outcome"] for e in events if e.type == "agent.invocation-completed"] == ["failed"]


def test_a_cancelled_run_sends_no_model_call(host, chat):
    from tests.workflows import definition, edge, node, static

    chat.answers = [(200, completion("too late"), {})]
    agent_id = _agent(host, chat.url)
    hold_ms = 3000
    hold = node("hold", "core.conformance.hold", inputs={"delayMs": static(hold_ms)})
    agent = node("agent", "core.agent", inputs={"input": static("hi")})
    agent["agent"] = {"agentId": agent_id}
    wid = f"wf-{uuid.uuid4().hex[:10]}"
    r = raw(
        host.base_url,
        "POST",
        f"{BASE}/workflows",
        definition(wid, [hold, agent], [edge("hold", "agent")]),
        key=host.key_a,
    )
    assert r.status == 201, r.text
    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId=wid))
    client.runs_cancel(run.runId)
    assert wait_terminal(client, run.runId).status == "cancelled"
    import time

    # A quiet window past the hold: had the cancel not stopped the run, the agent node would call the model as
    # soon as the hold ended, at most hold_ms from now (the hold began after the run was created); half a second
    # more covers the agent node's start
    time.sleep(hold_ms / 1000 + 0.5)
    assert chat.requests == []
    assert _ports().runs.query_aux(run.runId, "EFFECT#model") == []


def test_the_model_is_offered_an_mcp_tool_with_its_servers_description(host, chat):
    from shared.local.demo_mcp import DemoMcpServer

    # Given an MCP server whose lookup_customer tool is described, and an agent allowed to call it
    server = DemoMcpServer()
    url = server.start()
    try:
        server_id = "s" + uuid.uuid4().hex[:8]
        r = raw(host.base_url, "POST", f"{BASE}/mcp-servers", {"serverId": server_id, "url": url}, key=host.key_a)
        assert r.status == 201, r.text
        chat.answers = [(200, completion("nothing to look up"), {})]
        agent_id = _agent(host, chat.url, tools=[f"mcp:{server_id}.lookup_customer"])
        client = host.client(host.key_a)
        # When the agent runs
        run = client.runs_create(CreateRunRequest(workflowId=agent_workflow(host, agent_id)))
        assert wait_terminal(client, run.runId).status == "completed"
    finally:
        server.stop()
    # Then the model is offered the tool with the description its server lists (not its id) and its input schema
    [offered] = chat.requests[0]["body"]["tools"]
    assert offered["function"]["description"] == "A customer's name and tier by id."
    assert offered["function"]["parameters"]["required"] == ["id"]
