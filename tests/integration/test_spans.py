"""OpenTelemetry spans of runs on the local host, read from the SDK's in-memory exporter: a divergent replay marks
the diverging node's span ``openwop.replay.diverged``; a model call carries the GenAI attributes and no prompt,
message or credential unless the content opt-in is on; tool calls are spans too; every task of a run joins the
trace its creation started."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from openwop_client.types import CreateRunRequest, ForkRunRequest

from tests.chat_server import ScriptedChatServer, completion
from tests.helpers import ports as _ports
from tests.integration.test_model_agents import (
    BASE,
    agent_body,
    agent_workflow,
    lookup_then_answer,
    register_tool,
)
from tests.integration.test_model_agents_openai import _agent
from tests.wire import all_events, raw, types_of, wait_for_events, wait_terminal

SECRET = "sk-span-test-" + uuid.uuid4().hex
TICKET = "Customer c-1 cannot log in."  # the agent's input (agent_workflow)


class Traced:
    """The ports of this process with an OpenTelemetry Tracing port on an in-memory exporter."""

    def __init__(self) -> None:
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self.exporter = InMemorySpanExporter()

    def use(self, *, capture_content: bool = False) -> None:
        from shared.telemetry.otel import OtelTracing
        from shared.wiring import set_ports

        set_ports(
            replace(
                _ports(),
                tracing=OtelTracing(
                    self.exporter, service_name="openwop-test", capture_content=capture_content, batch=False
                ),
            )
        )

    def spans(self) -> list[Any]:
        return list(self.exporter.get_finished_spans())

    def trace(self, run_id: str) -> list[Any]:
        """The spans of the trace whose root is ``run_id``'s run span."""
        root = [s for s in self.spans() if s.name == "openwop.run" and s.attributes.get("openwop.run.id") == run_id]
        assert len(root) == 1, [s.name for s in self.spans()]
        tid = root[0].context.trace_id
        return [s for s in self.spans() if s.context.trace_id == tid]


@pytest.fixture
def traced(host: Any) -> Iterator[Traced]:
    from shared.wiring import set_ports

    t = Traced()
    t.use()
    try:
        yield t
    finally:
        set_ports(None)


@pytest.fixture
def chat() -> Iterator[ScriptedChatServer]:
    s = ScriptedChatServer()
    s.start()
    yield s
    s.stop()


def _credentialed_run(host: Any, chat: ScriptedChatServer, usage: tuple[int, int]) -> str:
    """A completed run of an OpenAI-wire agent bound to a tenant credential (``SECRET``) whose model answers
    "the answer is hello" with ``usage`` tokens; its run id."""
    ref = "llm-" + uuid.uuid4().hex[:6]
    r = raw(
        host.base_url,
        "PUT",
        f"{BASE}/credentials/{ref}",
        {"credential": {"type": "bearer", "token": SECRET}},
        key=host.key_a,
    )
    assert r.status in (200, 201), r.text
    chat.answers = [(200, completion("the answer is hello", usage=usage), {})]
    agent_id = _agent(host, chat.url, credential=ref)
    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId=agent_workflow(host, agent_id)))
    assert wait_terminal(client, run.runId).status == "completed"
    return str(run.runId)


def _dump(spans: list[Any]) -> str:
    return "\n".join(s.to_json() for s in spans)


def test_a_divergent_replay_marks_the_diverging_node_span(host, traced):
    # Given a side-effect run cancelled while its hold waits (so the hold never completed in the source)
    client = host.client(host.key_a)
    src = client.runs_create(CreateRunRequest(workflowId="conformance-replay-side-effect", inputs={"delayMs": 6000}))
    wait_for_events(client, src.runId, lambda ev: ("node.started", "wait") in types_of(ev))
    client.runs_cancel(src.runId)
    assert wait_terminal(client, src.runId).status == "cancelled"
    # When it is replayed: the hold completes where the source was cancelled (replay.diverged at seq 2)
    fork = client.runs_fork(src.runId, ForkRunRequest(fromSeq=0, mode="replay"))
    assert wait_terminal(client, fork.runId, timeout=30).status == "failed"
    spans = traced.trace(fork.runId)
    # Then exactly the hold's node span says the replay diverged there
    diverged = [s for s in spans if s.attributes.get("openwop.replay.diverged") is True]
    assert [
        (s.name, s.attributes["openwop.node.id"], s.attributes["openwop.replay.diverged_seq"]) for s in diverged
    ] == [("openwop.node", "wait", 2)]
    assert "node.completed" in diverged[0].attributes["openwop.events"]
    # and the source's trace carries no divergence
    assert not [s for s in traced.trace(src.runId) if "openwop.replay.diverged" in s.attributes]
    # and every task of the fork joined the trace its creation started: the run span is the tasks' parent, the
    # tasks the steps', and the run item holds the run span's context
    root = next(s for s in spans if s.name == "openwop.run")
    tasks = [s for s in spans if s.name == "openwop.task"]
    assert tasks and {s.parent.span_id for s in tasks} == {root.context.span_id}
    assert all(
        s.attributes["openwop.run.id"] == fork.runId
        and s.attributes["openwop.tenant"] == "tenant-a"
        and s.attributes["openwop.run.mode"] == "replay"
        for s in tasks
    )
    task_ids = {s.context.span_id for s in tasks}
    steps = [s for s in spans if s.name in ("openwop.node", "openwop.run.step")]
    assert steps and all(s.parent.span_id in task_ids for s in steps)
    stored = _ports().runs.get_run(fork.runId).data["traceparent"]
    assert stored.startswith(f"00-{root.context.trace_id:032x}-{root.context.span_id:016x}-")
    # and the fork's trace is not its source's (a fork never inherits the source's context)
    assert _ports().runs.get_run(src.runId).data["traceparent"] != stored


def test_a_model_call_span_has_the_gen_ai_attributes_and_no_content_or_secret(host, traced, chat):
    # Given an agent on the OpenAI-compatible wire with a tenant credential, answering with known token counts
    # When a run invokes it
    run_id = _credentialed_run(host, chat, (21, 4))
    assert chat.requests[0]["headers"]["authorization"] == f"Bearer {SECRET}"
    spans = traced.trace(run_id)
    # Then its model call is one client span named after the model, with the GenAI conventions' attributes
    calls = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(calls) == 1
    call = calls[0]
    assert call.name == "chat gpt-test" and call.kind.name == "CLIENT"
    assert {
        k: call.attributes[k]
        for k in (
            "gen_ai.system",
            "gen_ai.provider.name",
            "gen_ai.request.model",
            "gen_ai.request.temperature",
            "gen_ai.response.model",
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.output_tokens",
            "openwop.run.id",
            "openwop.tenant",
            "openwop.model_call.source",
        )
    } == {
        "gen_ai.system": "openai",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-test",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.response.model": "gpt-test-1",
        "gen_ai.usage.input_tokens": 21,
        "gen_ai.usage.output_tokens": 4,
        "openwop.run.id": run_id,
        "openwop.tenant": "tenant-a",
        "openwop.model_call.source": "live",
    }
    assert tuple(call.attributes["gen_ai.response.finish_reasons"]) == ("end_turn",)
    # and it is a child of the agent node's span
    parent = next(s for s in spans if s.context.span_id == call.parent.span_id)
    assert parent.name == "openwop.node" and parent.attributes["openwop.node.id"] == "agent"
    assert parent.attributes["openwop.node.type"] == "core.agent"
    # and no span holds the credential, the system prompt, the input or the answer
    text = _dump(traced.spans())
    assert SECRET not in text
    for content in ("You help.", TICKET, "the answer is hello"):
        assert content not in text
    assert not [
        k
        for s in spans
        for k in s.attributes
        if k in ("gen_ai.system_instructions", "gen_ai.input.messages", "gen_ai.output.messages")
    ]


def test_with_the_content_opt_in_a_model_span_carries_the_messages_and_still_no_secret(host, traced, chat):
    # Given the operator's opt-in to message content in spans
    traced.use(capture_content=True)
    # When a run invokes an agent with a tenant credential
    run_id = _credentialed_run(host, chat, (9, 2))
    call = next(s for s in traced.trace(run_id) if s.attributes.get("gen_ai.operation.name") == "chat")
    # Then the span carries the system prompt, the input and the answer as the GenAI content attributes
    assert json.loads(call.attributes["gen_ai.system_instructions"]) == [{"type": "text", "content": "You help."}]
    assert json.loads(call.attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": TICKET}]}
    ]
    out = json.loads(call.attributes["gen_ai.output.messages"])
    assert out == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "the answer is hello"}],
            "finish_reason": "end_turn",
        }
    ]
    # and still never the credential
    assert SECRET not in _dump(traced.spans())


def test_tool_calls_are_spans_and_a_replay_serves_model_calls_from_the_log(host, traced, server):
    # Given a mock-provider agent that looks a customer up with a loopback HTTP tool, then answers
    _, url = server
    org = "s" + uuid.uuid4().hex[:8]
    tool_id = register_tool(host, url, org)
    agent_id = f"{org}.resolver"
    r = raw(
        host.base_url,
        "POST",
        f"{BASE}/agents",
        agent_body(agent_id, "1.0.0", tool_id, lookup_then_answer(tool_id, "c-1")),
        key=host.key_a,
    )
    assert r.status == 201, r.text
    client = host.client(host.key_a)
    # When a run invokes it, and the run is replayed
    run = client.runs_create(CreateRunRequest(workflowId=agent_workflow(host, agent_id, "1.0.0")))
    assert wait_terminal(client, run.runId).status == "completed"
    fork = client.runs_fork(run.runId, ForkRunRequest(fromSeq=0, mode="replay"))
    assert wait_terminal(client, fork.runId, timeout=30).status == "completed"
    # Then the run's tool call is an execute_tool span under the agent's node span, with no arguments or result
    live = traced.trace(run.runId)
    tools = [s for s in live if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    assert [
        (
            s.name,
            s.attributes["gen_ai.tool.name"],
            s.attributes["openwop.tool.status"],
            s.attributes["openwop.tool.source"],
            s.attributes["openwop.tool.transport"],
        )
        for s in tools
    ] == [(f"execute_tool {tool_id}", tool_id, "ok", "live", "http")]
    assert "gen_ai.tool.call.arguments" not in tools[0].attributes and "c-1" not in tools[0].to_json()
    assert next(s for s in live if s.context.span_id == tools[0].parent.span_id).name == "openwop.node"
    models = [s for s in live if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert [(s.attributes["gen_ai.system"], s.attributes["openwop.model_call.turn"]) for s in models] == [
        ("openwop.mock", 0),
        ("openwop.mock", 1),
    ]
    # and the replay's model calls are spans served from the recorded log, its tool call from the record
    replayed = traced.trace(fork.runId)
    assert [
        s.attributes["openwop.model_call.source"]
        for s in replayed
        if s.attributes.get("gen_ai.operation.name") == "chat"
    ] == ["recorded", "recorded"]
    assert [
        s.attributes["openwop.tool.source"]
        for s in replayed
        if s.attributes.get("gen_ai.operation.name") == "execute_tool"
    ] == ["recorded"]
    assert not [s for s in replayed if "openwop.replay.diverged" in s.attributes]


def test_each_eval_trial_is_a_span_in_the_eval_runs_trace(host, traced):
    from tests.evalseed import register_loop_suites
    from tests.integration.test_eval_runs import run_eval

    # Given a suite of three tasks, two trials each (one task's echo call served by a fixture)
    suite_id = register_loop_suites(host, host.key_a)
    client = host.client(host.key_a)
    # When an eval run of it completes
    run_id = run_eval(client, f"{suite_id}@1.0.0")
    spans = traced.trace(run_id)
    # Then each trial is one span under the eval run's span
    root = next(s for s in spans if s.name == "openwop.run")
    assert root.attributes["openwop.run.kind"] == "eval"
    trials = [s for s in spans if s.name == "openwop.eval.trial"]
    assert sorted((s.attributes["openwop.eval.task_index"], s.attributes["openwop.eval.trial"]) for s in trials) == [
        (t, k) for t in range(3) for k in (1, 2)
    ]
    assert {s.parent.span_id for s in trials} == {root.context.span_id}
    # and its tool calls are its children: the live echo and the fixture-served one
    trial_ids = {s.context.span_id: s.attributes["openwop.eval.task_index"] for s in trials}
    calls = sorted(
        (trial_ids[s.parent.span_id], s.attributes["openwop.tool.source"])
        for s in spans
        if s.attributes.get("gen_ai.operation.name") == "execute_tool"
    )
    assert calls == [(0, "live"), (0, "live"), (1, "fixture"), (1, "fixture")]


def test_a_divergent_eval_replay_marks_the_diverging_task_span(host, traced):
    from tests.integration.test_eval_forks import alter_score, echo_suite
    from tests.integration.test_eval_runs import eval_request

    # Given a completed eval run of three tasks, and what it recorded for its second task's score altered
    suite_id = echo_suite(host, 3, "spans")
    client = host.client(host.key_a)
    src = client.runs_create(eval_request(f"{suite_id}@1.0.0")).runId
    assert wait_terminal(client, src, timeout=60).status == "completed"
    faithful = client.runs_fork(src, ForkRunRequest(fromSeq=0, mode="replay")).runId
    assert wait_terminal(client, faithful, timeout=60).status == "completed"
    altered = [e.sequence for e in all_events(client, src) if e.type == "eval.scored"][1]
    alter_score(host, src, altered, 0.5)
    # When it is replayed
    fork = client.runs_fork(src, ForkRunRequest(fromSeq=0, mode="replay")).runId
    assert wait_terminal(client, fork, timeout=60).status == "completed"
    assert [e.payload["atSequence"] for e in all_events(client, fork) if e.type == "replay.diverged"] == [altered]
    # Then exactly one span of the fork's trace says the replay diverged, at the altered event: the task that
    # appended the divergence, a child of the fork's run span
    spans = traced.trace(fork)
    diverged = [s for s in spans if s.attributes.get("openwop.replay.diverged") is True]
    assert [
        (s.name, s.attributes["openwop.replay.diverged_seq"], s.attributes["openwop.run.mode"]) for s in diverged
    ] == [("openwop.task", altered, "replay")]
    root = next(s for s in spans if s.name == "openwop.run")
    assert diverged[0].parent.span_id == root.context.span_id
    # and the faithful replay's trace, like the source's, carries no divergence
    for run_id in (faithful, src):
        assert not [s for s in traced.trace(run_id) if "openwop.replay.diverged" in s.attributes], run_id
