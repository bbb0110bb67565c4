"""The agent gateway (issue 35, decision 0143): the host as an external agent's MCP tool server and its
OpenAI-compatible model endpoint, under ``/host/openwop-serverless/gateway/{gatewayId}/``.

This package holds the seam the gateway's parts share:

- ``session`` resolves a gateway id and its bearer token into a ``GatewaySession`` (the run whose log records the
  calls, the agent version, and whether calls go live, are served from fixtures, or are replayed);
- ``tools`` answers ``POST G/mcp`` (MCP, Streamable HTTP, stateless, official ``mcp`` SDK server side);
- ``models`` answers ``POST G/v1/chat/completions``;
- ``complete`` ends a session (``POST G/complete``).

Each answers a ``GatewayRequest`` with a ``GatewayResponse``; the ``agent_gateway`` function turns those into and
out of its Lambda event, so none of them knows about API Gateway or function URLs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shared.engine.registry import AgentSpec
    from shared.ports import RunRecord

PRODUCTION = "production"  # a session run: tools and models go live, and are recorded as executed
EVAL = "eval"  # an eval trial of an external agent: tools served from the trial's fixtures, models live
REPLAY = "replay"  # a replay fork of a session: tools and models served from the source's record


@dataclass(frozen=True)
class GatewaySession:
    """One authenticated gateway caller: what its calls are recorded into and served from."""

    gateway_id: str
    tenant: str
    run_id: str  # the run whose log and tool-call store record the calls
    mode: str  # PRODUCTION | EVAL | REPLAY
    agent: AgentSpec  # the pinned version (``agent_from_version``): allowlist, model binding, content_free
    invocation_id: str  # "s:0" for a session or a fork; "<taskId>:<trial>" for an eval trial
    order_key: str  # the sequence of the invocation's ``agent.invocation-started`` (as ``key_of_call`` wants it)
    expires_at_ms: int
    source_run_id: str | None = None  # REPLAY: the session run the fork replays
    task_index: int | None = None  # EVAL: the trial's task (its index in the suite) and trial number
    trial: int | None = None
    run: RunRecord | None = None  # the run item as authentication read it: its retention is the records' TTL


@dataclass(frozen=True)
class GatewayRequest:
    method: str
    path: str  # the part after ``G``: "/mcp", "/v1/chat/completions", "/complete", ...
    headers: dict[str, str]  # names lowercased
    body: bytes
    query: str = ""


@dataclass(frozen=True)
class GatewayResponse:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
