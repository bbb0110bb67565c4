"""External agents (decision 0143, steps 1-2): the runtime on agent versions, sessions as runs, their tokens, the
gateway's routing, ``complete`` and expiry, on the local stack over HTTP."""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Any
from urllib.parse import urlsplit

import pytest

from shared.protocol.ids import project_id
from tests.helpers import eventually
from tests.helpers import ports as _ports
from tests.wire import raw

BASE = "/host/openwop-serverless"


def _agent(kind: str | None = "external", **runtime: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "version": "1.0.0",
        "manifest": {
            "agentId": "x" + uuid.uuid4().hex[:10],
            "persona": "Support resolver",
            "modelClass": "general",
            "systemPrompt": "You resolve support tickets.",
            "toolAllowlist": [],
        },
        "model": {"provider": "mock", "model": "mock-model"},
    }
    if kind is not None:
        body["runtime"] = {"kind": kind, **runtime}
    return body


def _register(host: Any, body: dict[str, Any], key: str | None = None) -> str:
    r = raw(host.base_url, "POST", f"{BASE}/agents", body, key=key or host.key_a)
    assert r.status == 201, r.text
    return str(body["manifest"]["agentId"])


def _session(host: Any, agent_id: str, body: dict[str, Any] | None = None, key: str | None = None) -> dict[str, Any]:
    r = raw(
        host.base_url,
        "POST",
        f"{BASE}/agents/{agent_id}/sessions",
        body if body is not None else {"input": {"ticket": "c-1 cannot log in"}},
        key=key or host.key_a,
    )
    assert r.status == 201, r.text
    return dict(r.json)


def _path(url: str) -> str:
    return urlsplit(url).path


def _call(host: Any, url: str, body: Any = None, *, token: str | None, method: str = "POST") -> Any:
    return raw(host.base_url, method, _path(url), body, key=token)


def _events(host: Any, run_id: str) -> list[dict[str, Any]]:
    r = raw(host.base_url, "GET", f"/runs/{project_id(run_id)}/events/poll", key=host.key_a)
    assert r.status == 200, r.text
    return list(r.json["events"])


def _status(host: Any, run_id: str) -> dict[str, Any]:
    r = raw(host.base_url, "GET", f"/runs/{project_id(run_id)}", key=host.key_a)
    assert r.status == 200, r.text
    return dict(r.json)


# --------------------------------------------------------------------------- runtime on agent versions


def test_an_external_agent_shows_its_runtime_and_a_host_agent_is_unchanged(host):
    # Given an external agent with an endpoint, and a host agent registered as before
    ext = _agent("external", endpoint={"url": "https://agent.example/invoke", "timeoutMs": 60_000})
    ext_id = _register(host, ext)
    host_body = _agent(None)
    host_id = _register(host, host_body)
    # When both are read
    got_ext = raw(host.base_url, "GET", f"/agents/{ext_id}", key=host.key_a)
    got_host = raw(host.base_url, "GET", f"/agents/{host_id}", key=host.key_a)
    # Then the inventory shows each one's runtime kind and whether it has an endpoint, never the endpoint itself
    assert got_ext.json["runtime"] == {"kind": "external", "hasEndpoint": True}
    assert "agent.example" not in got_ext.text
    assert got_host.json["runtime"] == {"kind": "host", "hasEndpoint": False}
    # and a host agent posted again with runtime host named is the identical version (200), not a conflict
    again = raw(host.base_url, "POST", f"{BASE}/agents", {**host_body, "runtime": {"kind": "host"}}, key=host.key_a)
    assert again.status == 200, again.text


@pytest.mark.parametrize(
    ("runtime", "pointer"),
    [
        ({"kind": "remote"}, "/runtime/kind"),
        ({"kind": "external", "endpoint": {"url": "ftp://agent.example/x"}}, "/runtime/endpoint/url"),
        (
            {"kind": "external", "endpoint": {"url": "https://a.example", "timeoutMs": 840_001}},
            "/runtime/endpoint/timeoutMs",
        ),
        ({"kind": "external", "endpoint": {"url": "https://a.example", "extra": 1}}, "/runtime/endpoint/extra"),
        ({"kind": "host", "endpoint": {"url": "https://a.example"}}, "/runtime/endpoint"),
    ],
)
def test_a_runtime_that_does_not_fit_is_refused_at_its_pointer(host, runtime, pointer):
    body = _agent(None)
    body["runtime"] = runtime
    got = raw(host.base_url, "POST", f"{BASE}/agents", body, key=host.key_a)
    assert got.status == 400, got.text
    assert got.json["error"] == "validation_error"
    assert pointer in [e["pointer"] for e in got.json["details"]["errors"]], got.text
    # and nothing is registered
    assert raw(host.base_url, "GET", f"/agents/{body['manifest']['agentId']}", key=host.key_a).status == 404


def test_an_endpoint_credential_must_be_the_tenants_own(host):
    body = _agent("external", endpoint={"url": "https://a.example", "credentialRef": "nope-" + uuid.uuid4().hex[:6]})
    got = raw(host.base_url, "POST", f"{BASE}/agents", body, key=host.key_a)
    assert got.status == 403 and got.json["error"] == "credential_forbidden", got.text


# --------------------------------------------------------------------------- sessions


def test_a_session_is_a_run_whose_log_opens_with_its_input_and_invocation(host):
    # Given an external agent
    agent_id = _register(host, _agent())
    # When a session is created
    s = _session(host, agent_id, {"input": {"ticket": "c-1"}})
    # Then it answers its run, token, gateway URLs, expiry and the version it runs
    assert set(s) == {
        "runId",
        "sessionId",
        "token",
        "mcpUrl",
        "openaiBaseUrl",
        "completeUrl",
        "expiresAt",
        "resolvedAgentVersion",
    }
    assert s["sessionId"] == s["runId"] and s["resolvedAgentVersion"] == "1.0.0"
    assert s["token"].startswith("owg_")
    root = f"{host.base_url}{BASE}/gateway/{project_id(s['runId'])}"
    assert (s["mcpUrl"], s["openaiBaseUrl"], s["completeUrl"]) == (f"{root}/mcp", f"{root}/v1", f"{root}/complete")
    # and the run is visible like any run, running, its log opening with run.started and agent.invocation-started
    assert _status(host, s["runId"])["status"] == "running"
    events = _events(host, s["runId"])
    assert [e["type"] for e in events] == ["run.started", "agent.invocation-started"]
    assert events[0]["payload"]["inputs"] == {"input": {"ticket": "c-1"}}
    started = events[1]["payload"]
    assert started["invocationId"] == "s:0" and started["agentId"] == agent_id
    assert started["source"] == "run-api" and started["resolvedAgentVersion"] == "1.0.0"
    # and the run list shows it
    listed = raw(host.base_url, "GET", "/runs?limit=50", key=host.key_a)
    assert s["runId"] in [r["runId"] for r in listed.json["runs"]]


def test_a_session_is_refused_for_a_host_agent_and_an_unknown_agent_or_version(host):
    host_id = _register(host, _agent(None))
    ext_id = _register(host, _agent())
    before = _session_runs(host)
    got = raw(host.base_url, "POST", f"{BASE}/agents/{host_id}/sessions", {"input": 1}, key=host.key_a)
    assert got.status == 409 and got.json["error"] == "openwop-serverless.agent_runtime_mismatch", got.text
    unknown = raw(
        host.base_url, "POST", f"{BASE}/agents/nobody-{uuid.uuid4().hex[:6]}/sessions", {"input": 1}, key=host.key_a
    )
    assert unknown.status == 404 and unknown.json["error"] == "not_found"
    # another tenant's agent is just as unknown
    foreign = raw(host.base_url, "POST", f"{BASE}/agents/{ext_id}/sessions", {"input": 1}, key=host.key_b)
    assert (foreign.status, foreign.text) == (unknown.status, unknown.text)
    version = raw(
        host.base_url, "POST", f"{BASE}/agents/{ext_id}/sessions", {"input": 1, "version": "9.9.9"}, key=host.key_a
    )
    assert version.status == 404, version.text
    no_input = raw(host.base_url, "POST", f"{BASE}/agents/{ext_id}/sessions", {"version": "1.0.0"}, key=host.key_a)
    assert no_input.status == 400 and "/input" in [e["pointer"] for e in no_input.json["details"]["errors"]]
    # and none of the refusals wrote a run
    assert _session_runs(host) == before


def _session_runs(host: Any) -> int:
    got = raw(
        host.base_url,
        "GET",
        "/runs?limit=100&workflowId=openwop-serverless.agent-session",
        key=host.key_a,
    )
    assert got.status == 200, got.text
    return len(got.json["runs"])


def test_the_same_401_bytes_for_an_unknown_id_a_foreign_run_and_a_wrong_or_missing_token(host):
    agent_a = _register(host, _agent())
    agent_b = _register(host, _agent(), key=host.key_b)
    mine = _session(host, agent_a)
    theirs = _session(host, agent_b, key=host.key_b)
    unknown = f"{host.base_url}{BASE}/gateway/{project_id('tenant-a/r-' + '0' * 26)}/complete"
    body = {"output": 1}
    answers = [
        _call(host, unknown, body, token=mine["token"]),  # an unknown gateway id
        _call(host, theirs["completeUrl"], body, token=mine["token"]),  # another tenant's run, my token
        _call(host, mine["completeUrl"], body, token=theirs["token"]),  # my run, another run's token
        _call(host, mine["completeUrl"], body, token="owg_" + "A" * 43),  # a wrong token
        _call(host, mine["completeUrl"], body, token=None),  # none
        _call(host, mine["completeUrl"], body, token=host.key_a),  # an API key is not a gateway token
    ]
    first = answers[0]
    assert first.status == 401 and first.json["error"] == "unauthenticated"
    assert first.headers.get("www-authenticate") == "Bearer"
    for other in answers[1:]:
        assert (other.status, other.text, other.headers.get("www-authenticate")) == (
            first.status,
            first.text,
            "Bearer",
        )
    # and neither run moved
    assert _status(host, mine["runId"])["status"] == "running"
    assert [e["type"] for e in _events(host, mine["runId"])] == ["run.started", "agent.invocation-started"]


def test_the_gateway_routes_its_paths(host):
    s = _session(host, _register(host, _agent()))
    root = s["completeUrl"].rsplit("/", 1)[0]
    token = s["token"]
    for method in ("GET", "DELETE"):
        got = _call(host, s["mcpUrl"], token=token, method=method)
        assert got.status == 405 and got.headers.get("allow") == "POST", (method, got.text)
    responses = _call(host, f"{root}/v1/responses", {"model": "m", "input": "hi"}, token=token)
    assert responses.status == 404 and "chat completions" in responses.json["message"], responses.text
    other = _call(host, f"{root}/elsewhere", {}, token=token)
    assert other.status == 404 and other.json["error"] == "not_found"
    assert _status(host, s["runId"])["status"] == "running"


# --------------------------------------------------------------------------- complete


def test_complete_ends_the_session_with_its_output_once(host):
    agent_id = _register(host, _agent())
    s = _session(host, agent_id)
    # When the agent completes with its output
    done = _call(host, s["completeUrl"], {"output": {"answer": "reset the password"}}, token=s["token"])
    # Then the run completed with it, in one append after the opening events
    assert done.status == 200 and done.json == {"runId": s["runId"], "status": "completed"}, done.text
    events = _events(host, s["runId"])
    assert [e["type"] for e in events] == [
        "run.started",
        "agent.invocation-started",
        "agent.decided",
        "agent.invocation-completed",
        "run.completed",
    ]
    assert events[2]["payload"] == {"agentId": agent_id, "decision": {"answer": "reset the password"}}
    assert events[3]["payload"] == {"invocationId": "s:0", "agentId": agent_id, "outcome": "completed"}
    assert events[4]["payload"] == {"outputs": {"output": {"answer": "reset the password"}}}
    assert _status(host, s["runId"])["status"] == "completed"
    # and a second complete, or any gateway call, is refused: the run has ended
    again = _call(host, s["completeUrl"], {"output": 2}, token=s["token"])
    assert again.status == 409 and again.json["error"] == "run_terminal", again.text
    mcp = _call(host, s["mcpUrl"], {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, token=s["token"])
    assert mcp.status == 409
    again_session = raw(host.base_url, "POST", f"{BASE}/runs/{project_id(s['runId'])}/session", key=host.key_a)
    assert again_session.status == 409, again_session.text
    assert len(_events(host, s["runId"])) == 5


def test_complete_with_an_error_fails_the_run_with_its_message(host):
    s = _session(host, _register(host, _agent()))
    done = _call(host, s["completeUrl"], {"error": {"message": "the CRM was down"}}, token=s["token"])
    assert done.status == 200 and done.json["status"] == "failed", done.text
    events = _events(host, s["runId"])
    assert events[-1]["type"] == "run.failed"
    assert events[-1]["payload"]["error"] == {"code": "agent_failed", "message": "the CRM was down"}
    assert events[-2]["payload"]["outcome"] == "failed"
    assert _status(host, s["runId"])["status"] == "failed"


@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        ({}, ""),
        ({"output": 1, "error": {"message": "x"}}, ""),
        ({"output": 1, "extra": 2}, "/extra"),
        ({"error": {"message": "x", "code": "y"}}, "/error/code"),
        ({"error": {}}, "/error/message"),
        ({"error": "boom"}, "/error"),
    ],
)
def test_a_complete_body_that_does_not_fit_is_refused_and_the_run_goes_on(host, body, pointer):
    s = _session(host, _register(host, _agent()))
    got = _call(host, s["completeUrl"], body, token=s["token"])
    assert got.status == 400 and got.json["error"] == "validation_error", got.text
    assert [e["pointer"] for e in got.json["details"]["errors"]] == [pointer]
    assert _status(host, s["runId"])["status"] == "running"


def test_the_session_route_re_derives_the_same_token(host):
    s = _session(host, _register(host, _agent()))
    got = raw(host.base_url, "POST", f"{BASE}/runs/{project_id(s['runId'])}/session", key=host.key_a)
    assert got.status == 200, got.text
    assert got.json == {**s, "input": {"ticket": "c-1 cannot log in"}}  # a fork's driver runs on the input
    # another tenant's run is refused like any other run route's
    foreign = raw(host.base_url, "POST", f"{BASE}/runs/{project_id(s['runId'])}/session", key=host.key_b)
    assert foreign.status == 403, foreign.text


# --------------------------------------------------------------------------- expiry


def test_a_gateway_call_after_expires_at_fails_the_session_then_and_there(host):
    from shared.errors import RunExpiredError
    from shared.services.gateway.session import authenticate

    s = _session(host, _register(host, _agent()))
    ports = _ports()

    class Later:  # the clock port, moved past the session's expiry
        def __init__(self, inner: Any, ahead_ms: int) -> None:
            self._inner, self._ahead = inner, ahead_ms

        def now_ms(self) -> int:
            return int(self._inner.now_ms()) + self._ahead

        def iso(self, ms: int | None = None) -> str:
            return str(self._inner.iso(self.now_ms() if ms is None else ms))

        def sleep(self, seconds: float) -> None:
            self._inner.sleep(seconds)

    later = dataclasses.replace(ports, clock=Later(ports.clock, (ports.settings.session_ttl_s + 1) * 1000))
    with pytest.raises(RunExpiredError):
        authenticate(later, project_id(s["runId"]), f"Bearer {s['token']}")
    # Then the run failed session_expired, and the gateway refuses it as ended
    snap = _status(host, s["runId"])
    assert snap["status"] == "failed" and snap["error"]["code"] == "session_expired", snap
    again = _call(host, s["completeUrl"], {"output": 1}, token=s["token"])
    assert again.status == 409 and again.json["error"] == "run_terminal"


def test_an_untouched_session_fails_on_its_own_at_expires_at(host):
    from shared.protocol.agents import SessionRequest
    from shared.services.agent_sessions import create_session
    from shared.services.common import Caller

    agent_id = _register(host, _agent())
    ports = _ports()
    short = dataclasses.replace(ports, settings=dataclasses.replace(ports.settings, session_ttl_s=1))
    # Given a session whose expiry is a second away, created through the service (the setting is per deployment)
    _, s = create_session(short, Caller("tenant-a", "test", ""), agent_id, SessionRequest(input=1), "http://x")
    # When nobody drives it, its execution's Wait ends at expiresAt and fails it
    snap = eventually(lambda: (got := _status(host, s["runId"]))["status"] != "running" and got, timeout=30)
    assert snap["status"] == "failed" and snap["error"]["code"] == "session_expired", snap
    # (an execution of the timer machine, which only waited and acted: decision 0189)
    arn = str(ports.runs.get_run(s["runId"]).execution_arn)
    sfn = host.aws.client("stepfunctions")
    history = sfn.get_execution_history(executionArn=arn, maxResults=100)["events"]
    entered = [e["stateEnteredEventDetails"]["name"] for e in history if e["type"].endswith("StateEntered")]
    assert arn.split(":")[-2] == "openwop-timer" and entered == ["Wait", "Act"], (arn, entered)
    events = _events(host, s["runId"])
    assert events[-1]["type"] == "run.failed" and events[-1]["payload"]["error"]["code"] == "session_expired"


def test_a_completed_session_is_not_failed_by_its_expiry(host):
    from shared.protocol.agents import SessionRequest
    from shared.services.agent_sessions import create_session
    from shared.services.common import Caller
    from tests.helpers import wait_for_execution

    agent_id = _register(host, _agent())
    ports = _ports()
    # (short, but long enough for the complete below to land first on a loaded machine: 2 s was not)
    short = dataclasses.replace(ports, settings=dataclasses.replace(ports.settings, session_ttl_s=10))
    _, s = create_session(short, Caller("tenant-a", "test", ""), agent_id, SessionRequest(input=1), host.base_url)
    # Given a session completed before its expiry
    done = _call(host, s["completeUrl"], {"output": "ok"}, token=s["token"])
    assert done.status == 200, done.text
    # When its execution's Wait ends at expiresAt
    arn = ports.runs.get_run(s["runId"]).execution_arn
    assert wait_for_execution(host.aws.client("stepfunctions"), arn, timeout=60)["status"] == "SUCCEEDED"
    # Then the expiry was a no-op: the run stays completed with its five events
    assert _status(host, s["runId"])["status"] == "completed"
    assert [e["type"] for e in _events(host, s["runId"])][-1] == "run.completed"


# --------------------------------------------------------------------------- the token stays secret


def test_the_token_is_in_no_event_and_no_log_line(host, capfd, caplog):
    import logging

    caplog.set_level(logging.DEBUG)
    agent_id = _register(host, _agent())
    s = _session(host, agent_id)
    token = s["token"]
    # When the session is driven through refusals and its completion
    _call(host, s["mcpUrl"], {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, token=token)
    _call(host, s["completeUrl"], {"output": 1, "error": {"message": "x"}}, token=token)
    _call(host, s["completeUrl"], {"output": {"token-free": True}}, token=token)
    _call(host, s["completeUrl"], {"output": 2}, token=token)
    # Then no event and no captured log output carries it
    events = _events(host, s["runId"])
    assert len(events) == 5 and token not in json.dumps(events)
    out, err = capfd.readouterr()
    assert token not in out and token not in err
    assert all(token not in r.getMessage() and token not in str(r.__dict__) for r in caplog.records)
    # nor does the stored run item
    rec = _ports().runs.get_run(s["runId"])
    assert token not in json.dumps(rec.data)


# --------------------------------------------------------------------------- the seam the gateway's parts use


def test_claims_and_appends_land_on_the_running_session_only(host):
    from shared.errors import RunTerminalError
    from shared.services.gateway.session import authenticate, claim, record_events

    s = _session(host, _register(host, _agent()))
    ports = _ports()
    session = authenticate(ports, project_id(s["runId"]), f"Bearer {s['token']}")
    assert (session.run_id, session.invocation_id, session.order_key) == (s["runId"], "s:0", f"{1:012d}")
    # Given ordinals claimed per counter, each counter from 0
    assert [claim(ports, session, "toolCalls") for _ in range(3)] == [0, 1, 2]
    assert claim(ports, session, "modelCalls") == 0
    # When events are recorded, they are in the run's log as the engine's are
    usage = {"provider": "mock", "model": "m", "inputTokens": 1, "outputTokens": 2}
    record_events(ports, session, [("provider.usage", usage)])
    assert _events(host, s["runId"])[-1]["payload"] == usage
    # Then once the session has ended, both are refused
    assert _call(host, s["completeUrl"], {"output": 1}, token=s["token"]).status == 200
    with pytest.raises(RunTerminalError):
        claim(ports, session, "toolCalls")
    with pytest.raises(RunTerminalError):
        record_events(ports, session, [("provider.usage", usage)])
    assert _events(host, s["runId"])[-1]["type"] == "run.completed"


def test_completed_sessions_build_a_suite_with_from_runs(host):
    # Given two completed sessions of an external agent, each with its input and output
    agent_id = _register(host, _agent())
    runs = []
    for i in range(2):
        s = _session(host, agent_id, {"input": {"ticket": f"c-{i}"}})
        assert _call(host, s["completeUrl"], {"output": f"answer-{i}"}, token=s["token"]).status == 200
        runs.append(s["runId"])
    # and a replay of the first, completed too: a re-execution, not production traffic
    fork = raw(host.base_url, "POST", f"/runs/{project_id(runs[0])}:fork", {"mode": "replay"}, key=host.key_a)
    assert fork.status == 201, fork.text
    again = raw(host.base_url, "POST", f"{BASE}/runs/{project_id(fork.json['runId'])}/session", key=host.key_a).json
    assert _call(host, again["completeUrl"], {"output": "answer-0"}, token=again["token"]).status == 200
    assert _status(host, fork.json["runId"])["status"] == "completed"
    # When a suite is built from them
    suite_id = f"tests.local.evals.s{uuid.uuid4().hex[:10]}"
    body = {"agentId": agent_id, "workflowId": "openwop-serverless.agent-session", "limit": 10}
    got = raw(host.base_url, "POST", f"{BASE}/eval-suites/{suite_id}:from-runs", body, key=host.key_a)
    assert got.status == 201, got.text
    # Then each task is a session's input and its output, named by its source run
    doc = raw(host.base_url, "GET", f"{BASE}/eval-suites/{suite_id}/versions/1.0.0", key=host.key_a).json
    by_source = {t["sourceRunId"]: t for t in doc["tasks"]}
    assert set(by_source) == set(runs)  # the replay is no task of its own
    assert by_source[runs[1]]["input"] == {"ticket": "c-1"}
    assert by_source[runs[1]]["expected"]["match"]["value"] == "answer-1"


def test_an_erased_session_is_gone_for_its_token_too(host):
    s = _session(host, _register(host, _agent()))
    gone = raw(host.base_url, "DELETE", f"/runs/{project_id(s['runId'])}", key=host.key_a)
    assert gone.status == 204, gone.text
    got = _call(host, s["completeUrl"], {"output": 1}, token=s["token"])
    assert got.status == 401 and got.json["error"] == "unauthenticated", got.text


def test_an_advance_task_that_meets_a_session_ends_and_leaves_it_running(host):
    from shared.engine import kernel
    from shared.engine.runkinds import RUN_KINDS

    s = _session(host, _register(host, _agent()))
    out = kernel.advance(_ports(), s["runId"], RUN_KINDS)
    assert out["next"] == "done"
    assert _status(host, s["runId"])["status"] == "running"
    assert len(_events(host, s["runId"])) == 2


def test_a_session_forks_into_a_session_its_driver_runs_again(host):
    s = _session(host, _register(host, _agent()))
    assert _call(host, s["completeUrl"], {"output": 1}, token=s["token"]).status == 200
    path = f"/runs/{project_id(s['runId'])}:fork"
    # a session forks from its start only: the agent runs again from there
    late = raw(host.base_url, "POST", path, {"mode": "replay", "fromSeq": 2}, key=host.key_a)
    assert late.status == 400 and late.json["details"]["errors"][0]["pointer"] == "/fromSeq", late.text
    got = raw(host.base_url, "POST", path, {"mode": "replay"}, key=host.key_a)
    assert got.status == 201, got.text
    assert (got.json["sourceRunId"], got.json["mode"], got.json["status"]) == (s["runId"], "replay", "running")
    fork = got.json["runId"]
    again = raw(host.base_url, "POST", f"{BASE}/runs/{project_id(fork)}/session", key=host.key_a)
    assert again.status == 200, again.text
    assert again.json["runId"] == fork and again.json["token"] != s["token"]
    assert again.json["input"] == {"ticket": "c-1 cannot log in"}
    assert [e["type"] for e in _events(host, fork)] == ["run.started", "agent.invocation-started"]
    # the fork's token opens the fork's gateway only; the source's is refused there
    assert _call(host, again.json["completeUrl"], {"output": 1}, token=s["token"]).status == 401
    assert _call(host, again.json["completeUrl"], {"output": 1}, token=again.json["token"]).status == 200
    # erasing the source reaches the fork (its lineage link)
    assert raw(host.base_url, "DELETE", f"/runs/{project_id(s['runId'])}", key=host.key_a).status in (200, 202, 204)
    eventually(lambda: raw(host.base_url, "GET", f"/runs/{project_id(fork)}", key=host.key_a).status == 404)


def test_a_session_log_streams_over_sse_like_any_run(host):
    s = _session(host, _register(host, _agent()))
    assert _call(host, s["completeUrl"], {"output": "streamed"}, token=s["token"]).status == 200
    got = [e.type for e in host.client(host.key_a).runs_events(s["runId"], stream_mode="debug", timeout_seconds=20)]
    assert got == [
        "run.started",
        "agent.invocation-started",
        "agent.decided",
        "agent.invocation-completed",
        "run.completed",
    ]
