"""What one Advance task of a workflow run knows about its run: its record, its loaded workflow, its mode (live, replay,
branch), what a fork's index recorded of its source, and the task's tool and model paths (``RunContext``). Built
once per task (``build_context``) and read by the node kinds (``workflownodes``) and the step loop
(``workflowrun``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared.engine import forkindex
from shared.engine.kernel import resolve_agent, run_workflow
from shared.engine.model_agent import ModelSession
from shared.engine.registry import AgentSpec
from shared.engine.tools import ToolRuntime, ToolTally
from shared.engine.workflow import Workflow
from shared.ports import Ports, RunRecord

SOURCE_PAGE = 1000  # events per read of a replay's source (a task appends at most 2,000)


@dataclass
class RunContext:
    ports: Ports
    record: RunRecord
    wf: Workflow
    mode: str  # live | replay | branch
    source_run_id: str | None = None
    source_outcomes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    source_calls: dict[tuple[str, int], dict[str, Any]] | None = None
    source_resolutions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    restart: bool = False  # a fork whose prefix ends inside a node: that node starts again
    source_digests: dict[str, Any] | None = None  # {key, events}: the replay's per-event digests of its source
    _source_cache: dict[int, dict[str, Any]] = field(default_factory=dict)
    _tools: ToolRuntime | None = None
    _models: ModelSession | None = None
    _agents: dict[str, AgentSpec | None] = field(default_factory=dict)
    tally: ToolTally | None = None  # the task's tool-call counts, when its handler asks for them

    @property
    def run_id(self) -> str:
        return self.record.run_id

    def tools(self) -> ToolRuntime:
        """The tool path for this task's steps (one catalog, so each registration is read once per task)."""
        if self._tools is None:
            self._tools = ToolRuntime(
                self.ports,
                self.run_id,
                self.record.tenant,
                self.mode,
                self.record.expires_at,
                self.ports.settings.run_tool_call_budget,
                self.source_calls,
                tally=self.tally,
            )
        return self._tools

    def models(self) -> ModelSession:
        """The model side of this task's steps: the run's model-call log, the source's log in a replay."""
        if self._models is None:
            ai = (self.record.data.get("configurable") or {}).get("ai")
            self._models = ModelSession(
                self.ports,
                self.run_id,
                self.record.tenant,
                self.mode,
                self.record.expires_at,
                ai,
                self.source_run_id if self.mode == "replay" else None,
                tally=self.tally,
            )
        return self._models

    def agent(self, nid: str, node: dict[str, Any]) -> AgentSpec | None:
        """The node's agent: the model-backed version the run pinned at create, or a built-in/scripted agent."""
        if nid not in self._agents:
            pinned = (self.record.data.get("agentPins") or {}).get(nid) or {}
            self._agents[nid] = resolve_agent(
                self.ports, self.record.tenant, node_agent_id(node), pinned.get("version")
            )
        return self._agents[nid]

    def source_event(self, seq: int, page: int = SOURCE_PAGE) -> dict[str, Any] | None:
        """The source's event at ``seq``. A replay asks in increasing order, so the source is read sequentially:
        one Query of at most ``page`` events from ``seq`` on (DynamoDB ``Limit``: nothing read is thrown
        away), the page replacing the last (bounded memory); a replay reads its source about once."""
        if self.source_run_id is None:
            return None
        if seq not in self._source_cache:
            got = self.ports.events.read_page(self.source_run_id, seq - 1, page, settled=True)
            self._source_cache = {int(ev["sequence"]): ev for ev in got}
        return self._source_cache.get(seq)


def node_agent_id(node: dict[str, Any]) -> str:
    """The agent a ``core.agent`` node invokes: its AgentRef (``agent.agentId``), else ``config.agentId``."""
    return str((node.get("agent") or {}).get("agentId") or (node.get("config") or {}).get("agentId") or "")


def build_context(ports: Ports, rec: RunRecord) -> RunContext:
    wf = run_workflow(ports, rec)
    fork = rec.data.get("fork") or {}
    ctx = RunContext(ports, rec, wf, str(fork.get("mode", "live")), fork.get("sourceRunId"))
    if fork and forkindex.needs_index(rec):
        src = forkindex.load(ports, rec.run_id)
        ctx.source_outcomes = src.get("outcomes", {})
        ctx.source_resolutions = src.get("resolutions", {})
        ctx.source_digests = src.get("digests")
        if ctx.mode == "replay":
            ctx.source_calls = {(r["invocationId"], int(r["index"])): r for r in src.get("calls", [])}
    return ctx
