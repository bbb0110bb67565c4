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
