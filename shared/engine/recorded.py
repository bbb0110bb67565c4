"""What a recorded run shows of one agent: read from its event log (pure; the caller pages the log in).

Used by RFC 0252's source check (the agent ran there; every call the log shows is held in the as-executed record)
and by suites built from recorded runs (issue 24): the input of the agent's first invocation and the decision it
reached, so a task replays the run. The input is rebuilt the way the engine built it: a workflow run's agent node
resolves its bindings against the run's inputs (``run.started``) and the outputs its upstream nodes had completed
with before it started; an eval run's invocation ``<taskId>:<trial>`` took that task's input from its pinned suite;
a session's input is its ``run.started.inputs.input``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from shared.engine.state import order_key
from shared.engine.tools import key_of_call
from shared.engine.workflow import UnresolvedInputError, resolve_node_inputs
from shared.protocol import codes as c

_MISSING = object()
# A session of an external agent (decision 0143): its run.started names this workflow and carries the agent's input
# as ``inputs.input``; its one invocation is ``s:0``.
SESSION_WORKFLOW = "openwop-serverless.agent-session"


@dataclass
class AgentLog:
    invoked: bool = False
    call_ids: set[str] = field(default_factory=set)
    first_invocation: str | None = None  # the invocationId of the agent's first invocation
    agent_node: str | None = None  # the workflow node that ran it (a workflow run)
    input: Any = _MISSING
    decision: Any = _MISSING
    # callId -> the key of its as-executed record, as a workflow run's engine wrote it (its invocation's order is the
    # sequence of its agent.invocation-started); a caller reads the records by these keys and checks each callId
    call_keys: dict[str, str] = field(default_factory=dict)

    @property
    def replayable(self) -> bool:
        """The first invocation's input and decision are both known (a task can be built from them)."""
        return self.input is not _MISSING and self.decision is not _MISSING


def _agent_nodes(definition: dict[str, Any] | None, agent_id: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for node in (definition or {}).get("nodes") or []:
        ref = node.get("agent") or {}
        if (
            node.get("typeId") == "core.agent"
            and str(ref.get("agentId") or (node.get("config") or {}).get("agentId") or "") == agent_id
        ):
            out[str(node.get("id"))] = node
    return out


def read_agent_log(
    pages: Iterable[list[dict[str, Any]]],
    agent_id: str,
    *,
    definition: dict[str, Any] | None = None,
    task_inputs: dict[str, Any] | None = None,
) -> AgentLog:
    """Fold the log for ``agent_id``. ``definition``: a workflow run's pinned definition; ``task_inputs``: an eval
    run's suite task inputs by taskId."""
    fold = _LogFold(agent_id, _agent_nodes(definition, agent_id), task_inputs)
    for page in pages:
        for ev in page:
            p = ev.get("payload") or {}
            if not isinstance(p, dict):
                continue
            fold.run_event(ev.get("type"), p)
            if p.get("agentId") == agent_id:
                fold.agent_event(ev, p)
    return fold.log


@dataclass
class _LogFold:
    """``read_agent_log``'s fold: the run's events (its inputs, the agent's node, the outputs upstream of it) and the
    agent's own (its invocations, calls and decision)."""

    agent_id: str
    nodes: dict[str, dict[str, Any]]
    task_inputs: dict[str, Any] | None
    log: AgentLog = field(default_factory=AgentLog)
    variables: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    orders: dict[str, str] = field(default_factory=dict)  # invocationId -> its order key

    def run_event(self, t: Any, p: dict[str, Any]) -> None:
        log = self.log
        if t == c.RUN_STARTED:
            self.variables = dict(p.get("inputs") or {})
            if p.get("workflowId") == SESSION_WORKFLOW and "input" in self.variables:
                log.input = self.variables["input"]
        elif t == c.NODE_STARTED and log.agent_node is None and str(p.get("nodeId")) in self.nodes:
            log.agent_node = str(p["nodeId"])
            try:
                resolved = resolve_node_inputs(self.nodes[log.agent_node], self.variables, self.outputs)
                log.input = resolved.get("input", resolved)
            except UnresolvedInputError:
                pass
        elif t == c.NODE_COMPLETED:
            self.outputs[str(p.get("nodeId"))] = p.get("outputs") or {}
            if (
                str(p.get("nodeId")) == log.agent_node
                and log.decision is _MISSING
                and "decision" in (p.get("outputs") or {})
            ):
                log.decision = p["outputs"]["decision"]

    def agent_event(self, ev: dict[str, Any], p: dict[str, Any]) -> None:
        t, log = ev.get("type"), self.log
        if t == c.AGENT_INVOCATION_STARTED:
            self._invocation_started(ev, p)
        elif t == c.AGENT_TOOL_CALLED:
            call_id = str(p.get("callId"))
            log.call_ids.add(call_id)
            inv, _, index = call_id.rpartition("#")
            if inv in self.orders and index.isdigit():
                log.call_keys[call_id] = key_of_call(self.orders[inv], int(index))
        elif t == c.AGENT_DECIDED and log.decision is _MISSING and "decision" in p:
            log.decision = p["decision"]

    def _invocation_started(self, ev: dict[str, Any], p: dict[str, Any]) -> None:
        log = self.log
        log.invoked = True
        self.orders.setdefault(str(p.get("invocationId")), order_key(int(ev.get("sequence", 0))))
        if log.first_invocation is None:
            log.first_invocation = str(p.get("invocationId"))
            task_id = log.first_invocation.rpartition(":")[0]
            if self.task_inputs is not None and task_id in self.task_inputs:
                log.input = self.task_inputs[task_id]
