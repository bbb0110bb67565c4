"""Seeding a stack: the deploy-time custom resource (``seed_host``, CDK context ``seed``) and ``openwop-serverless
seed`` share ``shared.services.seed.seed_stack``. The custom resource answers CloudFormation by a PUT to the
ResponseURL, here a capture server on loopback; the demo's tool servers are the real demo servers on loopback."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.helpers import own_calls, unique
from tests.integration.test_stack_mode import REGION, _deploy_outputs, _local_outputs, restore_env  # noqa: F401


class _Capture:
    """A loopback server standing in for CloudFormation's pre-signed response URL: records each PUT."""

    def __init__(self) -> None:
        self.puts: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_PUT(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.puts.append(
                    {"path": self.path, "contentType": self.headers.get("Content-Type"), "body": json.loads(raw)}
                )
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture()
def capture() -> Iterator[_Capture]:
    cap = _Capture()
    yield cap
    cap.server.shutdown()
    cap.server.server_close()


@pytest.fixture()
def demo_servers() -> Iterator[tuple[Any, str, Any, str]]:
    from shared.local.demo_mcp import DemoMcpServer
    from shared.local.demo_tools import DemoToolServer

    http = DemoToolServer()
    http_url = http.start()
    mcp = DemoMcpServer()
    mcp_url = mcp.start()
    yield http, http_url, mcp, mcp_url
    http.stop()
    mcp.stop()


def _event(capture: _Capture, request: str, **props: str) -> dict[str, Any]:
    return {
        "RequestType": request,
        "ResponseURL": f"{capture.url}/cfn/response?sig=abc",
        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/OpenWopHost-qa/1",
        "RequestId": unique("req"),
        "LogicalResourceId": "HostSeedingSeed",
        "ResourceType": "Custom::OpenWopSeed",
        "ResourceProperties": {
            "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:seed",
            "Stage": "qa",
            **props,
        },
    }


def _finished(client: Any, run_id: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while (snap := client.runs_get(run_id)).status not in ("completed", "failed", "cancelled"):
        assert time.monotonic() < deadline, snap
        time.sleep(0.1)
    return snap


def test_the_custom_resource_seeds_the_conformance_fixtures_and_answers_cloudformation(host, capture):
    from shared.local.front import invoke_in_process
    from shared.services import fixtures
    from shared.wiring import get_ports

    # Given a fixture workflow missing from the host table (a stack deployed without seeding)
    ports = get_ports()
    doc = ports.host.get_item("WORKFLOW#*", "conformance-noop")
    assert doc is not None
    ports.host.delete_item("WORKFLOW#*", "conformance-noop")
    try:
        # When CloudFormation creates the seed resource with seed=conformance
        out = invoke_in_process("seed_host", _event(capture, "Create", Sets="conformance"))
        # Then the fixture is back, exactly as shipped
        assert ports.host.get_item("WORKFLOW#*", "conformance-noop") == fixtures.workflows()["conformance-noop"]
    finally:
        if ports.host.get_item("WORKFLOW#*", "conformance-noop") is None:
            ports.host.put_item("WORKFLOW#*", "conformance-noop", doc)
    # and CloudFormation got one SUCCESS at its URL, with the counts as Data and an empty Content-Type
    (put,) = capture.puts
    assert put["path"] == "/cfn/response?sig=abc" and put["contentType"] == ""
    assert put["body"] == out
    assert out["Status"] == "SUCCESS"
    assert out["Data"] == {"Conformance": len(fixtures.workflows()) + len(fixtures.suites()), "DemoTenants": 0}
    assert (out["LogicalResourceId"], out["StackId"]) == (
        "HostSeedingSeed",
        "arn:aws:cloudformation:us-east-1:123456789012:stack/OpenWopHost-qa/1",
    )


def test_the_custom_resource_seeds_the_demo_and_its_run_calls_the_real_tool_servers(host, capture, demo_servers):
    from shared.local.front import invoke_in_process
    from shared.services import auth
    from shared.wiring import get_ports

    http, http_url, mcp, mcp_url = demo_servers
    tenant = unique("tenant-seeded")
    # When the stack is deployed with seed=demo for a new tenant and the demo servers' URLs
    out = invoke_in_process(
        "seed_host", _event(capture, "Create", Sets="demo", Tenants=tenant, DemoToolsUrl=http_url, DemoMcpUrl=mcp_url)
    )
    assert out["Status"] == "SUCCESS" and out["Data"] == {"Conformance": 0, "DemoTenants": 1}
    # Then that tenant, with a key, runs the demo workflow: the MCP lookup and two HTTP calls really happen
    key, _ = auth.create_api_key(get_ports(), tenant, "seed-test")
    client = host.client(key)
    from openwop_client.types import CreateRunRequest

    run = client.runs_create(CreateRunRequest(workflowId="demo-support"))
    assert _finished(client, run.runId).status == "completed"
    assert http.count() == 2 and http.count("/weather") == 1 and http.count("/tickets") == 1
    # and seeding again (a CloudFormation update) changes nothing and still succeeds
    again = invoke_in_process(
        "seed_host",
        {
            **_event(capture, "Update", Sets="demo", Tenants=tenant, DemoToolsUrl=http_url, DemoMcpUrl=mcp_url),
            "PhysicalResourceId": out["PhysicalResourceId"],
        },
    )
    assert again["Status"] == "SUCCESS" and again["PhysicalResourceId"] == out["PhysicalResourceId"]
    # and another tenant has none of it (the demo is registered per tenant)
    from shared.engine.kernel import load_definition

    assert load_definition(get_ports(), unique("tenant-other"), "demo-support") is None


@pytest.mark.parametrize(
    ("props", "reason"),
    [
        ({"Sets": "demo", "Tenants": "t"}, "the demo needs tenants"),
        ({"Sets": "conformance", "Stage": "prod"}, "seeding is refused in the prod stage"),
        ({"Sets": "everything"}, "unknown seed set everything"),
    ],
)
def test_a_seed_request_that_cannot_be_done_fails_the_deploy_with_a_one_line_reason(host, capture, props, reason):
    from shared.local.front import invoke_in_process

    # When CloudFormation sends a seed request the function must refuse
    out = invoke_in_process("seed_host", _event(capture, "Create", **props))
    # Then CloudFormation is told FAILED with the reason (one line, no traceback), and nothing hangs
    assert out["Status"] == "FAILED" and out["Reason"].startswith(reason), out["Reason"]
    assert "\n" not in out["Reason"] and "Traceback" not in out["Reason"]
    assert [p["body"]["Status"] for p in capture.puts] == ["FAILED"]


def test_an_unreachable_demo_mcp_server_fails_the_deploy_with_the_refusal(host, capture, demo_servers):
    from shared.local.front import invoke_in_process

    _, http_url, _, _ = demo_servers
    # When the demo's MCP URL answers nothing (a closed loopback port)
    out = invoke_in_process(
        "seed_host",
        _event(
            capture,
            "Create",
            Sets="demo",
            Tenants=unique("t"),
            DemoToolsUrl=http_url,
            DemoMcpUrl="http://127.0.0.1:9/mcp",
        ),
    )
    # Then the deploy fails with the registration's validation_error, not a traceback
    assert out["Status"] == "FAILED" and out["Reason"].startswith("validation_error: The MCP server could not be")


def test_deleting_the_seed_resource_runs_no_seeding(host, capture):
    from shared.local.front import invoke_in_process

    # When CloudFormation deletes the resource (even with a request that could not be seeded)
    out = invoke_in_process(
        "seed_host", {**_event(capture, "Delete", Sets="everything"), "PhysicalResourceId": "HostSeedingSeed-seed"}
    )
    # Then it answers SUCCESS under the same physical id, and seeded data is kept
    assert (out["Status"], out["PhysicalResourceId"]) == ("SUCCESS", "HostSeedingSeed-seed")


def test_the_seed_command_against_a_stack_seeds_through_its_outputs(host, capsys, restore_env):  # noqa: F811
    from shared.local.commands import main
    from shared.services import fixtures
    from shared.wiring import get_ports

    # Given a deployed (test-stage) stack whose outputs locate the host's resources, missing one fixture suite
    stack = _deploy_outputs(host, _local_outputs())
    suite_id = sorted(fixtures.suites())[0]
    ports = get_ports()
    saved = ports.host.get_item("SUITE#*", suite_id)
    ports.host.delete_item("SUITE#*", suite_id)
    try:
        # When the operator seeds the conformance fixtures through --stack
        assert main(["seed", "conformance", "--stack", stack, "--region", REGION]) == 0
        printed = json.loads(capsys.readouterr().out)
        # Then it printed what it seeded and the suite is back
        assert suite_id in printed["conformance"]
        assert get_ports().host.get_item("SUITE#*", suite_id) == fixtures.suites()[suite_id]
    finally:
        if get_ports().host.get_item("SUITE#*", suite_id) is None:
            get_ports().host.put_item("SUITE#*", suite_id, saved)


def test_the_seed_command_refuses_a_prod_stack_before_any_lookup(host, capsys, restore_env):  # noqa: F811
    from shared.local.commands import main

    # When the operator seeds a -prod stack (one that does not even exist here)
    code = main(["seed", "conformance", "--stack", "OpenWopHost-prod", "--region", REGION])
    # Then it is refused with one line, before CloudFormation is asked anything
    assert code == 1
    assert capsys.readouterr().err.strip() == (
        "error: seeding is refused in the prod stage: fixtures and demo tools are for test stages"
    )


def test_seeding_the_conformance_fixtures_is_one_put_per_fixture(host):
    from shared.services import fixtures, seed
    from shared.wiring import get_ports

    ports = get_ports()
    with own_calls(ports.host._c) as measure:  # type: ignore[attr-defined]
        # When the conformance fixtures are seeded (again: seeding is idempotent)
        seeded = measure.run(seed.seed_stack, ports, seed.seed_plan("conformance"))
    # Then each fixture cost exactly one PutItem, and nothing else was asked of AWS
    n = len(fixtures.workflows()) + len(fixtures.suites())
    assert len(seeded["conformance"]) == n == 16
    assert measure.counts() == {"dynamodb:PutItem": n}
