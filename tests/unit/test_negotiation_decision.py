"""MCP negotiation, pure: the one pinned revision's decision and reasons, the peer digest, the facet's refresh window,
and the readers of a run's log that must not take a ``negotiation.decided`` for a step (trajectories, what a
recorded run shows of an agent, the replay / ``:diff`` comparison)."""

from __future__ import annotations

import hashlib

import pytest

from shared.engine import negotiation as n
from shared.engine.agents import tool_events
from shared.engine.forkindex import comparable, event_digest
from shared.engine.recorded import read_agent_log
from shared.engine.registry import AgentSpec
from shared.engine.tools import ToolOutcome
from shared.engine.trajectory import steps
from shared.protocol import codes as c

DECIDED = {
    "protocol": "mcp",
    "outcome": "accepted",
    "version": "2026-07-28",
    "floor": "2026-07-28",
    "peerDigest": "0" * 64,
    "reason": "ok",
    "at": "2026-12-04T10:00:00.000Z",
}


@pytest.mark.parametrize(
    "requested, speaks, offered, outcome, reason, version",
    [
        ("2026-07-28", True, ["2026-07-28"], "accepted", "ok", "2026-07-28"),
        ("2026-07-28", False, ["2025-11-25", "2025-06-18"], "refused", "below-floor", None),  # all below the floor
        ("2026-07-28", False, ["2025-11-25", "2027-01-01"], "refused", "unsupported", None),  # one newer, not ours
        ("2026-07-28", False, [], "refused", "unsupported", None),  # named nothing
        ("2025-06-18", True, ["2025-06-18"], "refused", "below-floor", None),  # asked below the floor: never lowered
        ("2099-01-01", True, ["2099-01-01"], "refused", "unsupported", None),  # a revision this host does not speak
    ],
)
def test_the_decision_and_its_reason(requested, speaks, offered, outcome, reason, version):
    assert n.decide(requested, speaks, offered) == n.Decision(outcome, reason, version)


@pytest.mark.parametrize(
    "url, origin",
    [
        ("http://127.0.0.1:8080/mcp", "http://127.0.0.1:8080"),
        ("HTTPS://Tools.Example.COM:443/a/b?q=1", "https://tools.example.com"),
        ("http://example.com:80/", "http://example.com"),
        ("http://[::1]:9000/mcp", "http://[::1]:9000"),
    ],
)
def test_the_peer_is_the_digest_of_its_origin_never_the_origin(url, origin):
    assert n.origin(url) == origin
    decided = n.payload(n.Decision("accepted", "ok", n.REVISION), url, "2026-12-04T00:00:00.000Z")
    assert decided["peerDigest"] == hashlib.sha256(origin.encode()).hexdigest()
    assert not any(isinstance(v, str) and origin.split("//")[1] in v for v in decided.values())


def test_a_refused_payload_names_no_version():
    decided = n.payload(n.Decision("refused", "below-floor"), "http://127.0.0.1:1/mcp", "2026-12-04T00:00:00.000Z")
    assert decided == {
        "protocol": "mcp",
        "outcome": "refused",
        "floor": "2026-07-28",
        "peerDigest": decided["peerDigest"],
        "reason": "below-floor",
        "at": "2026-12-04T00:00:00.000Z",
    }


def test_the_facet_is_dropped_once_refreshed_at_is_older_than_ninety_days():
    import datetime

    reviewed = datetime.date.fromisoformat(n.REFRESHED_AT)
    last = (reviewed + datetime.timedelta(days=90)).isoformat()
    stale = (reviewed + datetime.timedelta(days=91)).isoformat()
    assert n.facet(last + "T23:59:59.999Z") == {
        "revisions": ["2026-07-28"],
        "preferredVersion": "2026-07-28",
        "minimumRevision": "2026-07-28",
        "refreshedAt": n.REFRESHED_AT,
        "client": True,
    }
    assert n.facet(stale + "T00:00:00.000Z") is None


def test_an_mcp_calls_negotiation_goes_right_before_its_events():
    agent = AgentSpec("a1")
    out = ToolOutcome("ok", {"content": []}, transport="mcp", negotiation=DECIDED)
    assert [t for t, _ in tool_events(agent, "inv#0", "mcp:s.t", {}, out)] == [
        c.NEGOTIATION_DECIDED,
        c.AGENT_TOOL_CALLED,
        c.AGENT_TOOL_RETURNED,
    ]
    assert tool_events(agent, "inv#0", "mcp:s.t", {}, out)[0][1] is DECIDED
    plain = ToolOutcome("ok", {"x": 1})
    assert [t for t, _ in tool_events(agent, "inv#0", "t", {}, plain)] == [c.AGENT_TOOL_CALLED, c.AGENT_TOOL_RETURNED]


def _log(with_negotiation: bool) -> list[dict]:
    head = [{"type": c.NEGOTIATION_DECIDED, "payload": DECIDED}] if with_negotiation else []
    return [
        {"type": c.RUN_STARTED, "payload": {"inputs": {}}},
        {"type": c.AGENT_INVOCATION_STARTED, "payload": {"agentId": "a1", "invocationId": "n:1"}},
        *head,
        {
            "type": c.AGENT_TOOL_CALLED,
            "payload": {"agentId": "a1", "toolName": "mcp:s.t", "callId": "n:1#0", "inputs": {"id": "x"}},
        },
        {
            "type": c.AGENT_TOOL_RETURNED,
            "payload": {
                "agentId": "a1",
                "toolName": "mcp:s.t",
                "callId": "n:1#0",
                "status": "ok",
                "outcome": {"content": []},
            },
        },
        {"type": c.AGENT_DECIDED, "payload": {"agentId": "a1", "decision": "done"}},
        {"type": c.AGENT_INVOCATION_COMPLETED, "payload": {"agentId": "a1", "invocationId": "n:1"}},
    ]


def test_trajectories_and_recorded_agent_logs_take_no_negotiation_for_a_step():
    # Given the same invocation with and without a negotiation before its MCP call
    # Then the trajectory (the eval report's divergence, :accept) and what the log shows of the agent (RFC 0252's
    # source check, suites from runs, sampling) are the same
    assert steps(_log(True)) == steps(_log(False))
    assert [s["type"] for s in steps(_log(True))] == ["tool-call", "tool-answer", "final-output"]
    a, b = read_agent_log([_log(True)], "a1"), read_agent_log([_log(False)], "a1")
    assert (a.invoked, a.call_ids, a.first_invocation, a.decision) == (
        b.invoked,
        b.call_ids,
        b.first_invocation,
        b.decision,
    )


def test_replay_and_diff_compare_a_negotiation_without_its_clock():
    ev = {"type": c.NEGOTIATION_DECIDED, "nodeId": None, "payload": DECIDED}
    later = {**ev, "payload": {**DECIDED, "at": "2026-12-05T00:00:00.000Z"}}
    refused = {**ev, "payload": {**DECIDED, "outcome": "refused", "reason": "below-floor"}}
    assert comparable(ev) == comparable(later) and event_digest(ev) == event_digest(later)
    assert event_digest(ev) != event_digest(refused)  # the check can fail: the decision itself is compared
    other = {"type": "eval.scored", "nodeId": None, "payload": {"at": 1}}
    assert comparable(other)["payload"] == {"at": 1}  # another type's `at` is not a clock field
