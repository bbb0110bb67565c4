"""Powertools observability of the functions: EMF metrics (namespace from settings) flushed per invocation, and
task logs correlated on the run id. Handlers are called in-process with the events AWS would send."""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import pytest

from bench.common import api_event
from tests.conftest import TEST_API_KEYS

KEY_A = next(iter(TEST_API_KEYS))


@pytest.fixture()
def emf(host, monkeypatch):
    """Metrics on (they are off in local mode), under a test namespace."""
    from shared import settings

    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.setenv("METRICS_NAMESPACE", "OpenWOP/test")
    settings.get_settings.cache_clear()
    yield
    settings.get_settings.cache_clear()


def _metrics(out: str) -> list[dict[str, Any]]:
    """The EMF documents printed on stdout: {metric name: value} with their namespace."""
    docs = []
    for line in out.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            doc = json.loads(line)
            names = [m["Name"] for d in doc["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]]
            docs.append({"namespace": doc["_aws"]["CloudWatchMetrics"][0]["Namespace"], **{n: doc[n] for n in names}})
    return docs


def _read_until(capsys, name: str, timeout_s: float = 30.0) -> str:
    """Stdout until an EMF document carries ``name``: a task flushes its metrics when its handler returns, which
    can be just after the client saw the run's terminal status (bounded wait)."""
    import time

    out = ""
    deadline = time.monotonic() + timeout_s
    while True:
        out += capsys.readouterr().out
        if any(name in d for d in _metrics(out)) or time.monotonic() > deadline:
            return out
        time.sleep(0.05)


def _authed(event: dict[str, Any]) -> dict[str, Any]:
    event["headers"]["authorization"] = f"Bearer {KEY_A}"
    return event


def test_a_started_run_is_counted_in_the_settings_namespace(emf, capsys):
    from shared.local.front import invoke_in_process

    # When a run is created through the create_run handler
    out = invoke_in_process(
        "create_run", _authed(api_event("POST", "/runs", "/runs", {"workflowId": "conformance-noop"}))
    )
    # Then it answered 201 and one EMF document counts it under the configured namespace
    assert out["statusCode"] == 201
    docs = _metrics(capsys.readouterr().out)
    started = [d for d in docs if "RunsStarted" in d]  # (the run's own tasks may flush in the same document)
    assert [d["namespace"] for d in started] == ["OpenWOP/test"] and started[0]["RunsStarted"] == [1.0]


def test_a_refused_request_is_counted_as_a_refusal(emf, capsys):
    from shared.local.front import invoke_in_process

    # When a request without a valid key reaches a handler
    event = api_event("GET", "/runs", "/runs")
    event["headers"]["authorization"] = "Bearer not-a-key"
    out = invoke_in_process("list_runs", event)
    # Then it is a 401, counted once as a refusal and not as a server error
    assert out["statusCode"] == 401
    docs = _metrics(capsys.readouterr().out)
    assert sum(len(d.get("Refusals", [])) for d in docs if d["namespace"] == "OpenWOP/test") == 1
    assert not [d for d in docs if "ServerErrors" in d]


def test_task_logs_correlate_on_the_run_id(emf, capsys):
    from functions._common.observability import logger
    from shared.local.front import invoke_in_process

    # When the advance task runs for a run id (one that does not exist: it is simply done)
    out = invoke_in_process("advance_run", {"runId": "tenant-a/r-obs-missing"})
    # Then the run id is the correlation id of its log lines, and a finished run is counted
    assert out["next"] == "done"
    assert logger().thread_safe_get_current_keys()["correlation_id"] == "tenant-a/r-obs-missing"
    # and an invocation on another thread (in-process invocations run side by side locally) does not move it
    other = threading.Thread(target=invoke_in_process, args=("advance_run", {"runId": "tenant-a/r-obs-other"}))
    other.start()
    other.join()
    # (a line this thread logs now, formatted by the logger's own formatter)
    line = logger().registered_formatter.format(
        logging.LogRecord("probe", logging.INFO, __file__, 1, "probe", None, None)
    )
    assert json.loads(line)["correlation_id"] == "tenant-a/r-obs-missing"
    assert any(d["namespace"] == "OpenWOP/test" and d.get("RunsFinished") for d in _metrics(capsys.readouterr().out))


def test_metrics_off_add_nothing_that_could_pile_up(host):
    from functions._common.observability import _tools, count

    # Given metrics disabled (local mode), when a counter is bumped many times
    for _ in range(150):
        count("RunsStarted")
    # Then nothing was stored (a disabled flush never clears the set)
    assert "RunsStarted" not in _tools()["metrics"].metric_set


def test_importing_a_handler_builds_no_tracer_and_loads_no_xray_sdk():
    import subprocess
    import sys

    # When a task handler and an API handler are imported in a fresh interpreter
    code = (
        "import sys, functions.erase_run.handler, functions.tasks.advance_run.handler, "
        "functions.create_run.handler; print('aws_xray_sdk' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # Then the X-Ray SDK (~250 ms of imports) was not loaded: tracing is assembled on the first traced invocation
    assert out.stdout.strip() == "False"


def _dimensioned(out: str, name: str) -> list[tuple[dict[str, str], float]]:
    """Each EMF document counting ``name`` alone (``count_by``): its dimension values and its value."""
    found = []
    for line in out.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            doc = json.loads(line)
            (directive,) = doc["_aws"]["CloudWatchMetrics"]
            if [m["Name"] for m in directive["Metrics"]] == [name]:
                assert directive["Namespace"] == "OpenWOP/test"
                dims = {d: doc[d] for d in directive["Dimensions"][0]}
                value = doc[name]
                found.append((dims, value[0] if isinstance(value, list) and len(value) == 1 else value))
    return found


def test_an_eval_start_and_each_refusal_code_are_counted(emf, capsys):
    from shared.local.front import invoke_in_process

    # When an eval run is created, and two requests are refused for different reasons
    body = {"mode": "eval", "evalSuiteRef": "conformance-eval-trajectory", "agentId": "conformance-eval-agent"}
    assert invoke_in_process("create_run", _authed(api_event("POST", "/runs", "/runs", body)))["statusCode"] == 201
    bad = api_event("GET", "/runs", "/runs")
    bad["headers"]["authorization"] = "Bearer not-a-key"
    assert invoke_in_process("list_runs", bad)["statusCode"] == 401
    unknown = _authed(api_event("POST", "/runs", "/runs", {"workflowId": "conformance-noop", "nope": 1}))
    assert invoke_in_process("create_run", unknown)["statusCode"] == 400
    out = capsys.readouterr().out
    # Then the eval start is counted as a run and as an eval
    started = [d for d in _metrics(out) if "EvalsStarted" in d]
    assert len(started) == 1 and started[0]["EvalsStarted"] == [1.0] and started[0]["RunsStarted"] == [1.0]
    # and each refusal is counted under its protocol code
    assert sorted((dims["code"], value) for dims, value in _dimensioned(out, "RefusalsByCode")) == [
        ("unauthenticated", 1.0),
        ("validation_error", 1.0),
    ]
    assert all(dims["service"] == "openwop-serverless" for dims, _ in _dimensioned(out, "RefusalsByCode"))


def test_tool_calls_by_transport_status_and_source_and_fixture_misses_are_counted(host, emf, capsys):
    from tests.integration.test_eval_runs import run_eval

    client = host.client(host.key_a)
    # Given a recorded source eval run (two live calls of the native counter tool)
    source = run_eval(client, "conformance-eval-recorded-source")
    out = capsys.readouterr().out
    assert (
        {"service": "openwop-serverless", "transport": "native", "status": "ok", "source": "live"},
        2.0,
    ) in _dimensioned(out, "ToolCalls")
    # When an eval whose task drifts from it is served that run's calls as fixtures (RFC 0252)
    run_eval(client, "conformance-eval-recorded-drift", fixtureRuns={"record": source})
    out = _read_until(capsys, "EvalsFinished")
    # Then its trial counted one served call, one fail-closed miss, and no live call
    calls = [(d["transport"], d["status"], d["source"], v) for d, v in _dimensioned(out, "ToolCalls")]
    assert ("native", "ok", "fixture", 1.0) in calls and ("native", "error", "fixture", 1.0) in calls
    assert [v for _, v in _dimensioned(out, "FixtureMisses")] == [1.0]
    # and the eval's finish is counted
    assert any(d.get("EvalsFinished") == [1.0] for d in _metrics(out))


def test_model_calls_sent_are_counted_by_provider_and_status_and_served_ones_are_not(host, emf, capsys):
    import uuid

    from openwop_client.types import CreateRunRequest, ForkRunRequest

    from tests.integration.test_model_agents import agent_workflow
    from tests.wire import raw, wait_terminal

    client = host.client(host.key_a)
    agent_id = f"x{uuid.uuid4().hex[:8]}.counted"
    body = {
        "version": "1.0.0",
        "model": {"provider": "mock", "model": "m", "mockProvider": {"script": [{"text": "one"}]}},
        "manifest": {"agentId": agent_id, "persona": "P", "modelClass": "general", "systemPrompt": "s"},
    }
    assert raw(host.base_url, "POST", "/host/openwop-serverless/agents", body, key=host.key_a).status == 201
    # Given a live run of a model-backed agent (one model call)
    run = client.runs_create(CreateRunRequest(workflowId=agent_workflow(host, agent_id)))
    wait_terminal(client, run.runId)
    out = _read_until(capsys, "RunsFinished")
    assert [(d["provider"], d["status"], v) for d, v in _dimensioned(out, "ModelCalls")] == [("mock", "ok", 1.0)]
    # When it is replayed: the answer is served from the log, no provider call is counted
    child = client.runs_fork(run.runId, ForkRunRequest(mode="replay", fromSeq=0)).runId
    wait_terminal(client, child)
    assert _dimensioned(_read_until(capsys, "RunsFinished"), "ModelCalls") == []
