"""Endpoint-driven evals of an external agent (decision 0143, step 6), black box over real HTTP: a loopback endpoint
of the test's own runs a small agent per request (the official ``mcp`` client against ``mcpUrl``, the official
``openai`` client against ``openaiBaseUrl``, both with the trial's token) and answers ``{"output"}``; a counting MCP
tool server (``DemoMcpServer``) is the agent's tool. The suite comes from recorded production sessions
(``:from-runs``). The same suite run with the harness (the waiting list and ``complete``, what ``eval run --exec``
does) reaches the same summary and report shapes; a timeout, a 5xx and an egress refusal each fail only their own
trials, with a reason that carries no token and no credential, and the run completes.

(The bad-URL leg, an endpoint that is not http(s) refused at ``/runtime/endpoint/url``, is
``test_agent_sessions.py::test_a_runtime_that_does_not_fit_is_refused_at_its_pointer``.)"""

from __future__ import annotations

import asyncio
import dataclasses
import http.server
import json
import re
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from openai import OpenAI

from shared.local.demo_mcp import DemoMcpServer
from shared.protocol.ids import project_id
from tests.helpers import eventually
from tests.helpers import ports as _ports
from tests.wire import raw

BASE = "/host/openwop-serverless"
SECRET = "sk-endpoint-" + uuid.uuid4().hex  # the endpoint's credential: never in a reason, an event or a report
CUSTOMERS = ("c-1", "c-2", "c-3")


def _agent_run(body: dict[str, Any], drift: bool = False) -> Any:
    """The agent: look the customer up through the tool gateway, ask the model once, answer the name and tier."""
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    token, customer = body["token"], body["input"]["customerId"]

    async def tool() -> Any:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
            streamable_http_client(body["mcpUrl"], http_client=http) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            listed = await client.list_tools()
            [lookup] = listed.tools  # the one allowlisted tool, under its wire name
            return await client.call_tool(lookup.name, {"id": customer + ("-x" if drift else "")})

    found = asyncio.run(tool())
    model = OpenAI(base_url=body["openaiBaseUrl"], api_key=token, max_retries=0)
    model.chat.completions.create(model="any", messages=[{"role": "user", "content": f"greet {customer}"}])
    if found.is_error:
        return {"found": False}
    return {"name": found.structured_content["name"], "tier": found.structured_content["tier"]}


@dataclasses.dataclass
class Endpoint:
    """The loopback endpoint: ``POST /<mode>`` runs the agent; ``faulty`` sleeps for c-1 and answers 500 for c-2."""

    url: str = ""
    hits: Counter[str] = dataclasses.field(default_factory=Counter)
    bodies: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    auth: list[str | None] = dataclasses.field(default_factory=list)
    release: threading.Event = dataclasses.field(default_factory=threading.Event)
    _server: Any = None

    def start(self) -> None:
        state = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's spelling
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                mode = self.path.strip("/")
                state.hits[mode] += 1
                state.bodies.append(body)
                state.auth.append(self.headers.get("Authorization"))
                customer = body["input"]["customerId"]
                if mode == "faulty" and customer == "c-1":
                    state.release.wait(30)  # past the version's timeoutMs: held until the module ends
                if mode == "faulty" and customer == "c-2":
                    self._answer(500, {"error": f"boom for {body['token']}"})
                    return
                try:
                    output = _agent_run(body, drift=mode == "drift")
                except Exception as exc:  # a dead gateway after the host gave up on this trial: nobody reads it
                    self._answer(502, {"error": type(exc).__name__})
                    return
                self._answer(200, {"output": output})

            def _answer(self, status: int, doc: Any) -> None:
                data = json.dumps(doc).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the host timed out and closed

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture(scope="module")
def stack(host) -> Iterator[dict[str, Any]]:
    """The tool server, the endpoint, one agent with a version per behaviour, and a suite from 3 sessions."""
    ports = _ports()
    saved = ports.settings
    # as make serve does (shared/local/commands.py): an endpoint trial's gateway URLs are under the host's base URL
    ports.settings = dataclasses.replace(saved, gateway_url=host.base_url)
    tools, endpoint = DemoMcpServer(), Endpoint()
    tools.start()
    endpoint.start()
    try:
        yield _build(host, tools, endpoint)
    finally:
        ports.settings = saved
        endpoint.stop()
        tools.stop()


def _build(host: Any, tools: DemoMcpServer, endpoint: Endpoint) -> dict[str, Any]:
    server_id = "e" + uuid.uuid4().hex[:8]
    r = raw(host.base_url, "POST", f"{BASE}/mcp-servers", {"serverId": server_id, "url": tools.url}, key=host.key_a)
    assert r.status == 201, r.text
    ref = "ep-" + uuid.uuid4().hex[:6]
    r = raw(
        host.base_url,
        "PUT",
        f"{BASE}/credentials/{ref}",
        {"credential": {"type": "bearer", "token": SECRET}},
        key=host.key_a,
    )
    assert r.status in (200, 201), r.text
    agent_id = "x" + uuid.uuid4().hex[:10]
    versions = {
        "1.0.0": None,  # the harness: trials wait for their driver
        "1.1.0": {"url": f"{endpoint.url}/ok", "credentialRef": ref},
        "1.2.0": {"url": f"{endpoint.url}/drift", "credentialRef": ref},
        "1.3.0": {"url": f"{endpoint.url}/faulty", "credentialRef": ref, "timeoutMs": 10_000},
        "1.4.0": {"url": "http://10.255.255.1:9/invoke?key=" + SECRET, "credentialRef": ref},  # refused: private
    }
    for version, ep in versions.items():
        body = {
            "version": version,
            "manifest": {
                "agentId": agent_id,
                "persona": "Support resolver",
                "modelClass": "general",
                "systemPrompt": "Set by the agent's own code.",
                "toolAllowlist": [f"mcp:{server_id}.lookup_customer"],
            },
            "model": {"provider": "mock", "model": "mock-model"},
            "runtime": {"kind": "external", **({"endpoint": ep} if ep else {})},
        }
        r = raw(host.base_url, "POST", f"{BASE}/agents", body, key=host.key_a)
        assert r.status == 201, r.text
    # Three production sessions, run by the same agent code and completed with its output
    for customer in CUSTOMERS:
        r = raw(
            host.base_url,
            "POST",
            f"{BASE}/agents/{agent_id}/sessions",
            {"input": {"customerId": customer}, "version": "1.0.0"},
            key=host.key_a,
        )
        assert r.status == 201, r.text
        s = r.json
        output = _agent_run({**s, "input": {"customerId": customer}})
        done = raw(host.base_url, "POST", _path(s["completeUrl"]), {"output": output}, key=s["token"])
        assert done.status == 200, done.text
    assert tools.calls["lookup_customer"] == 3
    suite_id = f"tests.local.evals.x{uuid.uuid4().hex[:10]}"
    body = {"agentId": agent_id, "workflowId": "openwop-serverless.agent-session", "limit": 10}
    r = raw(host.base_url, "POST", f"{BASE}/eval-suites/{suite_id}:from-runs", body, key=host.key_a)
    assert r.status == 201, r.text
    return {"agentId": agent_id, "suite": f"{suite_id}@1.0.0", "tools": tools, "endpoint": endpoint, "ref": ref}


def _path(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).path


def _start(host: Any, stack: dict[str, Any], version: str) -> str:
    body = {
        "mode": "eval",
        "evalSuiteRef": stack["suite"],
        "agentId": stack["agentId"],
        "configurable": {"version": 1, "extensions": {"openwop-serverless": {"agentVersion": version}}},
    }
    r = raw(host.base_url, "POST", "/runs", body, key=host.key_a)
    assert r.status == 201, r.text
    return str(r.json["runId"])


def _terminal(host: Any, run_id: str, timeout: float = 90) -> dict[str, Any]:
    def done() -> Any:
        r = raw(host.base_url, "GET", f"/runs/{project_id(run_id)}", key=host.key_a)
        return r.json if r.json["status"] in ("completed", "failed", "cancelled") else None

    out: dict[str, Any] = eventually(done, timeout=timeout, interval=0.2)
    return out


def _summary(host: Any, run_id: str) -> dict[str, Any]:
    r = raw(host.base_url, "GET", f"/runs/{project_id(run_id)}/eval-summary", key=host.key_a)
    assert r.status == 200, r.text
    out: dict[str, Any] = r.json
    return out


def _report(host: Any, run_id: str) -> dict[str, Any]:
    r = raw(host.base_url, "GET", f"{BASE}/runs/{project_id(run_id)}/eval-report", key=host.key_a)
    assert r.status == 200, r.text
    out: dict[str, Any] = r.json
    return out


def _endpoint_eval(host: Any, stack: dict[str, Any], version: str) -> tuple[dict[str, Any], dict[str, Any]]:
    run_id = _start(host, stack, version)
    assert _terminal(host, run_id)["status"] == "completed"
    return _summary(host, run_id), _report(host, run_id)


def _harness_eval(host: Any, stack: dict[str, Any], fail: str = "") -> tuple[dict[str, Any], dict[str, Any]]:
    """What ``eval run --exec`` does: list the waiting trials, run the agent on each, ``complete`` it (the trial of
    customer ``fail`` completes with an error whose message quotes its token, as a careless agent's might)."""
    run_id = _start(host, stack, "1.0.0")
    driven: set[tuple[str, int]] = set()

    def drive() -> Any:
        r = raw(host.base_url, "GET", f"{BASE}/runs/{project_id(run_id)}/trials?status=waiting", key=host.key_a)
        assert r.status == 200, r.text
        for t in r.json["trials"]:
            if (t["taskId"], t["trial"]) not in driven:
                if t["input"]["customerId"] == fail:
                    outcome = {"error": {"message": f"crashed; OPENAI_API_KEY={t['token']}"}}
                else:
                    outcome = {"output": _agent_run(t)}
                done = raw(host.base_url, "POST", _path(t["completeUrl"]), outcome, key=t["token"])
                assert done.status == 200, done.text
                driven.add((t["taskId"], t["trial"]))
        return len(driven) == len(CUSTOMERS)

    eventually(drive, timeout=90, interval=0.2)
    assert _terminal(host, run_id)["status"] == "completed"
    return _summary(host, run_id), _report(host, run_id)


def _shape(doc: Any) -> Any:
    """The keys of a document, recursively (lists by their first item): what two drivers must agree on."""
    if isinstance(doc, dict):
        return {k: _shape(v) for k, v in sorted(doc.items())}
    if isinstance(doc, list):
        return [_shape(doc[0])] if doc else []
    return type(doc).__name__ if doc is not None else None


def _trials(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["taskId"]: t["trialResults"][0] for t in report["tasks"]}


@pytest.fixture(scope="module")
def endpoint_run(host, stack) -> dict[str, Any]:
    """The suite from the sessions, run once through the endpoint (version 1.1.0): what the host called."""
    live, hits = stack["tools"].calls["lookup_customer"], stack["endpoint"].hits["ok"]
    summary, report = _endpoint_eval(host, stack, "1.1.0")
    return {"summary": summary, "report": report, "live": live, "hits": hits}


def test_an_endpoint_eval_passes_from_the_record_with_the_harness_shapes(host, stack, endpoint_run):
    tools, endpoint = stack["tools"], stack["endpoint"]
    live = endpoint_run["live"]
    # When the suite from the sessions runs once through the endpoint and once through the harness
    summary, report = endpoint_run["summary"], endpoint_run["report"]
    harness_summary, harness_report = _harness_eval(host, stack)
    # Then the endpoint was called once per task, with the trial's fields and the endpoint's credential
    assert endpoint.hits["ok"] == endpoint_run["hits"] + len(CUSTOMERS)
    sent = [b for b in endpoint.bodies if f"/gateway/{project_id(report['runId'])}.t" in b["mcpUrl"]]
    assert sorted(b["input"]["customerId"] for b in sent) == list(CUSTOMERS)
    assert all(set(b) == {"input", "taskId", "trial", "mcpUrl", "openaiBaseUrl", "token", "deadline"} for b in sent)
    assert all(b["mcpUrl"].startswith(host.base_url + BASE + "/gateway/") for b in sent)
    assert {endpoint.auth[endpoint.bodies.index(b)] for b in sent} == {f"Bearer {SECRET}"}
    # every task passes, served from the record: no tool call reached the tool server
    assert tools.calls["lookup_customer"] == live
    for doc in (report, harness_report):
        assert doc["status"] == "completed" and doc["taskCount"] == len(CUSTOMERS)
        trials = list(_trials(doc).values())
        assert [t["passed"] for t in trials] == [True] * len(CUSTOMERS)
        assert [t["liveToolCalls"] for t in trials] == [0] * len(CUSTOMERS)
        assert [len(t["toolCalls"]) for t in trials] == [1] * len(CUSTOMERS)
        assert [t["fixtureMissCount"] for t in trials] == [0] * len(CUSTOMERS)
    assert summary["aggregateScore"] == harness_summary["aggregateScore"] == 1.0
    # and the two drivers reach the same shapes
    assert _shape(summary) == _shape(harness_summary)
    assert _shape(report) == _shape(harness_report)
    # the trial's token and the endpoint's credential are in no stored event
    stored = json.dumps(_ports().events.read_events(report["runId"]))
    assert SECRET not in stored and not any(b["token"] in stored for b in sent)


def test_a_drifted_call_is_a_fixture_miss_and_never_reaches_the_tool(host, stack):
    tools = stack["tools"]
    live = tools.calls["lookup_customer"]
    summary, report = _endpoint_eval(host, stack, "1.2.0")
    assert tools.calls["lookup_customer"] == live
    trials = list(_trials(report).values())
    assert [t["passed"] for t in trials] == [False] * len(CUSTOMERS)
    assert [t["fixtureMissCount"] for t in trials] == [1] * len(CUSTOMERS)
    assert [t["liveToolCalls"] for t in trials] == [0] * len(CUSTOMERS)
    misses = [m for task in report["tasks"] for m in task["fixtureMisses"]]
    assert len(misses) == len(CUSTOMERS) and {tuple(m["differingPointers"]) for m in misses} == {("/id",)}
    assert report["verdict"] != "pass" and summary["aggregateScore"] == 0.0


def test_a_timeout_a_5xx_and_an_egress_refusal_fail_only_their_own_trials(host, stack):
    tools, endpoint = stack["tools"], stack["endpoint"]
    live = tools.calls["lookup_customer"]
    # When an endpoint sleeps past its timeoutMs for c-1 and answers 500 for c-2
    summary, report = _endpoint_eval(host, stack, "1.3.0")
    by_customer = _customer_trials(report)
    assert endpoint.hits["faulty"] == len(CUSTOMERS)
    assert [by_customer[c].get("error") for c in CUSTOMERS] == [
        {"code": "agent_failed", "message": "the endpoint call failed (the tool did not answer in time)"},
        {"code": "agent_failed", "message": "the endpoint answered HTTP 500"},
        None,
    ]
    # Then those two trials fail with their reasons, the third passes, and the run completes
    assert report["status"] == "completed" and summary["aggregateScore"] == pytest.approx(1 / 3)
    assert by_customer["c-3"]["passed"] is True and "error" not in by_customer["c-3"]
    timed_out, failed = by_customer["c-1"], by_customer["c-2"]
    assert (timed_out["passed"], failed["passed"]) == (False, False)
    # When the endpoint's URL is one the egress guard refuses (a private address)
    hits = sum(endpoint.hits.values())
    summary, report = _endpoint_eval(host, stack, "1.4.0")
    # Then nothing was sent, every trial fails with the refusal, and the run still completes
    assert sum(endpoint.hits.values()) == hits
    assert report["status"] == "completed" and summary["aggregateScore"] == 0.0
    reasons = {t["error"]["message"] for t in _trials(report).values()}
    assert reasons == {"egress refused: the tool's host resolves to a private address, which this host does not call"}
    assert tools.calls["lookup_customer"] == live
    # and no reason carries a token or the credential
    everything = json.dumps(report) + json.dumps(_ports().events.read_events(report["runId"]))
    assert SECRET not in everything and not any(b["token"] in everything for b in endpoint.bodies)


def _customer_trials(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each task's trial by the customer it is about (its expected output, recorded from its session)."""
    out = {}
    for task in report["tasks"]:
        name = task["expected"]["match"]["value"]["name"]  # "Customer c-1"
        out[name.rsplit(" ", 1)[1]] = task["trialResults"][0]
    return out


def test_a_retried_trial_scores_the_endpoints_answer_without_calling_it_again(host, stack, endpoint_run):
    """A Trial task run again (a Lambda retry) after its endpoint answered: scored from the stored answer."""
    from shared.engine import externaltrial
    from shared.engine.evalplan import load_plan
    from shared.engine.kernel import resolve_agent
    from shared.services.eval_trials import issuer

    ports, run_id = _ports(), endpoint_run["report"]["runId"]
    rec, plan = ports.runs.get_run(run_id), load_plan(ports, run_id)
    agent = resolve_agent(ports, rec.tenant, stack["agentId"], "1.1.0")
    hits = sum(stack["endpoint"].hits.values())
    result = externaltrial.endpoint_trial(ports, rec, plan, 0, 1, agent, issuer(ports))
    assert sum(stack["endpoint"].hits.values()) == hits
    assert (result.decided, result.passed, result.error) == (True, True, None)
    assert result.decision == plan["suite"]["tasks"][0]["expected"]["match"]["value"]


def test_a_harness_trial_that_fails_says_why_without_its_token(host, stack):
    summary, report = _harness_eval(host, stack, fail="c-2")
    by_customer = _customer_trials(report)
    assert [by_customer[c]["passed"] for c in CUSTOMERS] == [True, False, True]
    assert by_customer["c-2"]["error"] == {"code": "agent_failed", "message": "crashed; OPENAI_API_KEY=owg_[redacted]"}
    assert report["status"] == "completed" and summary["aggregateScore"] == pytest.approx(2 / 3)
    # nor is the token kept on the trial's own item
    stored = json.dumps([doc for _sk, doc in _ports().runs.query_aux(report["runId"], "TWAIT#")])
    assert "crashed; OPENAI_API_KEY=owg_[redacted]" in stored
    assert not re.search(r"owg_[A-Za-z0-9_-]{16,}", stored)
