"""Strict registration with pointers (issue 24 part 6): every validation error of every registration route carries
``details.errors: [{pointer, keyword, message}]``, each pointer an RFC 6901 JSON Pointer at the bad member of the
request body (a path parameter: the pointer ``""`` and the parameter's name). One test per route family, each
case the exact pointer of its bad member, on the local host over HTTP."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from shared.engine.jsondiff import resolve
from tests.wire import raw

BASE = "/host/openwop-serverless"
SUITES = f"{BASE}/eval-suites"
AGENT = "conformance-eval-agent"
UNKNOWN_RUN = "tenant-a/r-0000000000000000000000000000"
POINTER = re.compile(r"^(/([^~/]|~[01])*)*$")  # RFC 6901 §3


def _suite_id() -> str:
    return f"tests.ptr.evals.s{uuid.uuid4().hex[:10]}"


def _refused(host: Any, method: str, path: str, body: Any, expected: tuple[str, str | None]) -> list[dict[str, str]]:
    """Send one bad registration and check its refusal: 400 validation_error whose first entry points at
    ``expected`` (pointer, parameter); a member the body has (unless it is missing by rule) is resolvable."""
    r = raw(host.base_url, method, path, body, key=host.key_a)
    assert (r.status, r.json["error"]) == (400, "validation_error"), r.text
    errors = r.json["details"]["errors"]
    assert errors and all(
        POINTER.match(e["pointer"]) and isinstance(e["message"], str) and e["message"] for e in errors
    ), errors
    first = errors[0]
    assert (first["pointer"], first.get("parameter")) == expected, errors
    if first.get("parameter") is None and first["keyword"] != "required":
        assert resolve(body, first["pointer"])[0], (first, body)  # RFC 6901 evaluation
    return errors


def _plain(suite_id: str, **task: Any) -> dict[str, Any]:
    return {
        "suiteId": suite_id,
        "version": "1.0.0",
        "modes": ["golden"],
        "tasks": [
            {
                "taskId": "t",
                "input": {"calls": [], "answer": "a"},
                "expected": {"kind": "golden", "match": {"strategy": "exact", "value": "a"}},
                **task,
            }
        ],
    }


@pytest.mark.parametrize(
    ("method", "path", "body", "expected"),
    [
        (
            "POST",
            f"{BASE}/tools",
            {
                "toolId": "tptr.crm:lookup",
                "description": "d",
                "inputSchema": {"type": "object"},
                "source": {"kind": "http", "url": "http://127.0.0.1:1/x"},
                "credentialRef": "nowhere",
            },
            ("/credentialRef", None),
        ),
        (
            "POST",
            f"{BASE}/tools",
            {
                "toolId": "tptr.crm:lookup",
                "description": "d",
                "inputSchema": {"type": 5},
                "source": {"kind": "http", "url": "http://127.0.0.1:1/x"},
            },
            ("/inputSchema", None),
        ),
        ("POST", f"{BASE}/mcp-servers", {"serverId": "ptr", "url": "http://169.254.169.254/mcp"}, ("/url", None)),
        (
            "PUT",
            f"{BASE}/credentials/not%20a%20ref",
            {"credential": {"type": "bearer", "token": "t"}},
            ("", "credentialRef"),
        ),
    ],
)
def test_tool_mcp_server_and_credential_refusals_point_at_the_member(host, method, path, body, expected):
    _refused(host, method, path, body, expected)


def test_agent_and_deployment_refusals_point_at_the_member(host):
    agent_id = f"p{uuid.uuid4().hex[:8]}.pointer"
    agent = {
        "version": "1.0.0",
        "maxTurns": 2,
        "manifest": {
            "agentId": agent_id,
            "persona": "p",
            "modelClass": "general",
            "systemPrompt": "s",
            "toolAllowlist": ["conformance.eval:echo", "conformance.eval:nope"],
        },
        "model": {"provider": "mock", "model": "m", "mockProvider": {"script": [{"text": "x"}]}},
    }
    # A tool the tenant cannot call, then (registered) a version the agent does not have, a channel it cannot use
    _refused(host, "POST", f"{BASE}/agents", agent, ("/manifest/toolAllowlist/1", None))
    agent["manifest"]["toolAllowlist"] = ["conformance.eval:echo"]
    assert raw(host.base_url, "POST", f"{BASE}/agents", agent, key=host.key_a).status == 201
    _refused(
        host,
        "POST",
        f"/agents/{agent_id}/deployments",
        {"version": "9.9.9", "transition": "promote"},
        ("/version", None),
    )
    _refused(
        host,
        "POST",
        f"/agents/{agent_id}/deployments",
        {"version": "1.0.0", "transition": "pause"},
        ("/transition", None),
    )
    _refused(host, "POST", f"{BASE}/agents/{agent_id}/deployments/blue:rollback", None, ("", "channel"))


def test_workflow_refusals_point_at_the_member(host):
    from tests.workflows import definition, node

    doc = definition(f"ptr-{uuid.uuid4().hex[:8]}", [node("a", "core.noop")], [])
    doc["nodes"][0]["extra"] = 1
    errors = _refused(host, "POST", f"{BASE}/workflows", doc, ("/nodes/0", None))
    assert errors[0]["keyword"] == "additionalProperties"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"url": "http://127.0.0.1:9/h", "events": ["run.started", "run.bogus"]}, "/events/1"),
        ({"url": "http://127.0.0.1:9/h", "events": ["run.started", "run.completed", "run.started"]}, "/events/2"),
        (
            {"url": "http://127.0.0.1:9/h", "events": ["run.started"], "signatureAlgorithms": ["standard-webhooks-1"]},
            "/signatureAlgorithms",
        ),
        (
            {"url": "http://127.0.0.1:9/h", "events": ["run.started"], "signatureAlgorithms": ["v1", "v1"]},
            "/signatureAlgorithms/1",
        ),
        (
            {
                "url": "http://127.0.0.1:9/h",
                "events": ["run.started"],
                "signatureAlgorithms": ["v1", "standard-webhooks-1"],
            },
            "/secret",
        ),
    ],
)
def test_webhook_refusals_point_at_the_member(host, body, expected):
    _refused(host, "POST", "/webhooks", body, (expected, None))


def test_webhook_rotation_refusals_point_at_the_member(host):
    _refused(host, "POST", "/webhooks/not-an-id/rotate-secret", {"secret": "whsec_" + "A" * 43}, ("", "webhookId"))


def test_eval_suite_refusals_point_at_the_member(host):
    sid = _suite_id()
    _refused(host, "POST", SUITES, _plain(sid, sourceRunId=UNKNOWN_RUN), ("/targetAgentId", None))
    _refused(
        host,
        "POST",
        SUITES,
        {**_plain(sid, sourceRunId=UNKNOWN_RUN), "targetAgentId": AGENT},
        ("/tasks/0/sourceRunId", None),
    )
    bad_regex = _plain(sid)
    bad_regex["tasks"][0]["expected"]["match"] = {"strategy": "regex", "value": "(unclosed"}
    _refused(host, "POST", SUITES, bad_regex, ("/tasks/0/expected/match/value", None))
    odd = _plain(sid)
    odd["tasks"][0]["expected"]["match"] = {"strategy": "exact", "value": 1, "tolerance": 2}
    _refused(host, "POST", SUITES, odd, ("/tasks/0/expected/match/tolerance", None))


@pytest.mark.parametrize(
    ("path_id", "body", "expected"),
    [
        (None, {"agentId": AGENT, "seed": "s"}, ("/seed", None)),
        (None, {"agentId": AGENT, "startedAfter": "2026-13-45T99:00:00Z"}, ("/startedAfter", None)),
        (None, {"agentId": AGENT, "runIds": [UNKNOWN_RUN]}, ("/runIds/0", None)),
        (None, {"agentId": AGENT, "runIds": [UNKNOWN_RUN], "limit": 3}, ("/limit", None)),
        (None, {"agentId": AGENT, "base": "latest"}, ("/base", None)),
        (None, {"runIds": [UNKNOWN_RUN]}, ("/agentId", None)),
        (None, {"agentId": AGENT, "sampleRate": 2}, ("/sampleRate", None)),
        ("Not_A_Suite", {"agentId": AGENT}, ("", "suiteId")),
    ],
)
def test_from_runs_refusals_point_at_the_member(host, path_id, body, expected):
    _refused(host, "POST", f"{SUITES}/{path_id or _suite_id()}:from-runs", body, expected)


@pytest.mark.parametrize(
    ("path_id", "body", "expected"),
    [
        (None, {"version": "one"}, ("/version", None)),
        (None, {"version": "1.0.0", "extra": 1}, ("/extra", None)),
        (None, [], ("", None)),
        (None, {}, ("", None)),  # the draft holds no task
        ("Not_A_Suite", {}, ("", "suiteId")),
    ],
)
def test_publish_refusals_point_at_the_member(host, path_id, body, expected):
    _refused(host, "POST", f"{SUITES}/{path_id or _suite_id()}:publish", body, expected)


def test_rule_refusals_point_at_the_member(host):
    sid = _suite_id()
    _refused(host, "POST", f"{SUITES}/{sid}/rules", {"agentId": AGENT, "maxTasks": 0}, ("/maxTasks", None))
    _refused(host, "POST", f"{SUITES}/{sid}/rules", {"agentId": AGENT, "filter": {"status": "x"}}, ("/filter", None))
    _refused(host, "POST", f"{SUITES}/Not_A_Suite/rules", {"agentId": AGENT}, ("", "suiteId"))
    assert raw(host.base_url, "POST", f"{SUITES}/{sid}/rules", {"agentId": AGENT}, key=host.key_a).status == 201
    _refused(host, "POST", f"{SUITES}/{sid}/rules", {"agentId": "another-agent"}, ("/agentId", None))


@pytest.mark.parametrize(
    ("path_id", "body", "expected"),
    [
        (None, {"runId": 5}, ("/runId", None)),
        (None, {"taskIds": ["a"]}, ("/runId", None)),
        (None, {"runId": UNKNOWN_RUN, "extra": 1}, ("/extra", None)),
        (None, {"runId": UNKNOWN_RUN, "taskIds": ["a", 1]}, ("/taskIds/1", None)),
        (None, {"runId": UNKNOWN_RUN, "taskIds": []}, ("/taskIds", None)),
        (None, {"runId": UNKNOWN_RUN}, ("/reason", None)),  # why: required (decision 0146)
        (None, {"runId": UNKNOWN_RUN, "reason": " "}, ("/reason", None)),
        (
            None,
            {"runId": UNKNOWN_RUN, "reason": "r", "answers": [{"taskId": "a", "call": -1}]},
            ("/answers/0/response", None),
        ),
        (None, {"runId": UNKNOWN_RUN, "reason": "r", "dropTaskIds": [1]}, ("/dropTaskIds/0", None)),
        (None, {"runId": UNKNOWN_RUN, "reason": "r"}, ("/runId", None)),  # the uniform refusal of an unusable run
        ("Not_A_Suite", {"runId": UNKNOWN_RUN}, ("", "suiteId")),
    ],
)
def test_accept_refusals_point_at_the_member(host, path_id, body, expected):
    _refused(host, "POST", f"{SUITES}/{path_id or _suite_id()}:accept", body, expected)
