"""The agent's first invocation as a recorded log shows it (``shared.engine.recorded``): pure, no storage."""

from __future__ import annotations

from typing import Any

from shared.engine.recorded import read_agent_log

AGENT = "agent-a"


def _ev(t: str, **payload: Any) -> dict[str, Any]:
    return {"type": t, "payload": payload}


DEFINITION = {
    "nodes": [
        {"id": "fetch", "typeId": "core.noop", "inputs": {}},
        {
            "id": "agent",
            "typeId": "core.agent",
            "config": {"agentId": AGENT},
            "inputs": {
                "input": {"type": "connection", "nodeId": "fetch", "outputKey": "doc"},
                "extra": {"type": "variable", "variableName": "who"},
            },
        },
    ]
}


def test_a_workflow_agent_input_is_rebuilt_from_run_inputs_and_upstream_outputs():
    # Given a log where the agent node reads an upstream output, then decides twice across two invocations
    pages = [
        [
            _ev("run.started", inputs={"who": "ana"}),
            _ev("node.completed", nodeId="fetch", outputs={"doc": {"v": 1}}),
            _ev("node.started", nodeId="agent", typeId="core.agent"),
            _ev("agent.invocation-started", agentId=AGENT, invocationId="agent#0"),
            _ev("agent.tool-called", agentId=AGENT, callId="c1"),
            _ev("agent.decided", agentId=AGENT, decision="first"),
        ],
        [
            _ev("node.completed", nodeId="fetch", outputs={"doc": {"v": 2}}),
            _ev("agent.invocation-started", agentId=AGENT, invocationId="agent#1"),
            _ev("agent.decided", agentId=AGENT, decision="second"),
        ],
    ]
    # When the log is read for the agent
    log = read_agent_log(pages, AGENT, definition=DEFINITION)
    # Then the first invocation's input is the binding as it resolved then, and its decision the first one
    assert log.replayable and log.input == {"v": 1}
    assert log.decision == "first" and log.call_ids == {"c1"} and log.first_invocation == "agent#0"


def test_an_eval_run_invocation_takes_its_task_input_and_another_agent_is_not_read():
    pages = [
        [
            _ev("agent.invocation-started", agentId="other", invocationId="t0:1"),
            _ev("agent.decided", agentId="other", decision="no"),
            _ev("agent.invocation-started", agentId=AGENT, invocationId="t1:1"),
            _ev("agent.decided", agentId=AGENT, decision="yes"),
        ]
    ]
    log = read_agent_log(pages, AGENT, task_inputs={"t0": "in-0", "t1": "in-1"})
    assert (log.input, log.decision, log.invoked) == ("in-1", "yes", True)
    # and a log without the agent is neither invoked nor replayable
    none = read_agent_log(pages, "absent", task_inputs={"t0": "in-0"})
    assert not none.invoked and not none.replayable


def test_a_session_input_is_its_run_started_input():
    # Given a session's log (decision 0143): its input in run.started, one invocation s:0, a tool call, a decision
    pages = [
        [
            _ev("run.started", workflowId="openwop-serverless.agent-session", inputs={"input": {"ticket": "c-1"}}),
            {**_ev("agent.invocation-started", agentId=AGENT, invocationId="s:0"), "sequence": 1},
            _ev("agent.tool-called", agentId=AGENT, callId="s:0#0"),
            _ev("agent.decided", agentId=AGENT, decision={"answer": "ok"}),
        ]
    ]
    # When it is read for the agent
    log = read_agent_log(pages, AGENT)
    # Then a task can be built from it: the input as the agent got it, its decision, its call's record key
    assert log.replayable and log.input == {"ticket": "c-1"} and log.decision == {"answer": "ok"}
    assert log.call_keys == {"s:0#0": f"{1:012d}#00000"}


def test_a_workflow_named_otherwise_does_not_take_its_input_from_run_started():
    pages = [[_ev("run.started", workflowId="wf", inputs={"input": 1}), _ev("agent.invocation-started", agentId=AGENT)]]
    assert not read_agent_log(pages, AGENT).replayable
