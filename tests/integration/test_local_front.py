"""The local HTTP front: API Gateway HTTP API routing and payload v2.0 mapping, SSE streaming, and `serve`."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.local.front import LocalFront, Router, last_event_id
from shared.manifest import routes
from tests.helpers import ServeProcess, eventually

ROOT = Path(__file__).resolve().parents[2]
ENDLESS_CALL_S = 0.02  # how long the endless stream handler takes per call (the slowness it simulates)
Route = routes.Route


# -- routing (the manifest table) -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def router() -> Router:
    return Router(routes.ROUTES)


def test_router_variable_is_exactly_one_whole_segment(router: Router) -> None:
    assert router.match("GET", "/runs/r1") == (routes.ROUTES[4], {"runId": "r1"})
    assert router.match("GET", "/runs/r1:diff")[1] == {"runId": "r1:diff"}  # type: ignore[index]
    assert router.match("GET", "/runs/r1/nope") is None
    assert router.match("GET", "/runs/") is None  # an empty segment is not a value
    assert router.match("GET", "/runs/a/b/events") is None


def test_router_keeps_percent_encoded_slash_in_one_segment(router: Router) -> None:
    matched = router.match("GET", "/runs/acme%2Fabc/events")

    assert matched is not None
    route, params = matched
    assert (route.function, params) == ("stream_run_events", {"runId": "acme/abc"})


def test_router_literal_segments_beat_variables_in_any_order() -> None:
    variable = Route("GET", "/runs/{runId}/events", "by_id")
    literal = Route("GET", "/runs/special/events", "special")
    greedy = Route("ANY", "/runs/{proxy+}", "catch_all")
    for table in ([variable, literal, greedy], [greedy, literal, variable]):
        router = Router(table)
        assert router.match("GET", "/runs/special/events")[0].function == "special"  # type: ignore[index]
        assert router.match("GET", "/runs/other/events")[0].function == "by_id"  # type: ignore[index]
        assert router.match("POST", "/runs/a/b/c") == (greedy, {"proxy": "a/b/c"})


def test_router_wrong_method_and_unknown_path_do_not_match(router: Router) -> None:
    assert router.match("PUT", "/runs/r1") is None
    assert router.match("GET", "/nope") is None
    assert router.match("POST", "/runs/r1/cancel")[0].function == "cancel_run"  # type: ignore[index]


def test_last_event_id_takes_the_last_id_field() -> None:
    assert last_event_id(b"id: 4\ndata: x\n\nid:5\ndata: y\n\n") == "5"
    assert last_event_id(b"data: no id\n\n") is None


# -- HTTP with fake handlers -----------------------------------------------------------------------------------------


class FakeFunctions:
    """An injected invoker: records events, answers per function name."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.stream_calls: list[str | None] = []
        self.endless_calls = 0

    def __call__(self, name: str, event: dict[str, Any]) -> Any:
        self.events.append((name, event))
        return getattr(self, name)(event)

    def echo(self, event: dict[str, Any]) -> Any:
        return {"seen": event}  # plain dict: inferred 200 JSON

    def custom(self, event: dict[str, Any]) -> Any:
        return {
            "statusCode": 201,
            "headers": {"X-Custom": "yes", "x-openwop-stream": "end"},
            "cookies": ["a=1", "b=2"],
            "body": "aGVsbG8=",
            "isBase64Encoded": True,
        }

    def boom(self, event: dict[str, Any]) -> Any:
        raise RuntimeError("handler bug")

    def stream(self, event: dict[str, Any]) -> Any:
        last = event["headers"].get("last-event-id")
        self.stream_calls.append(last)
        if event["pathParameters"]["runId"] == "missing":
            return {"statusCode": 404, "headers": {"Content-Type": "application/json"}, "body": '{"error":"not_found"}'}
        n = int(last or 0) + 1
        return {
            "statusCode": 200,
            "headers": {
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-store",
                "x-openwop-stream": "end" if n == 3 else "more",
            },
            "body": f'id: {n}\ndata: {{"n": {n}, "q": "{event["rawQueryString"]}"}}\n\n',
        }

    def endless(self, event: dict[str, Any]) -> Any:
        self.endless_calls += 1
        time.sleep(ENDLESS_CALL_S)
        return {"statusCode": 200, "body": f"id: {self.endless_calls}\ndata: tick\n\n"}


FAKE_ROUTES = (
    Route("GET", "/runs/{runId}", "echo"),
    Route("POST", "/runs/{runId}", "echo"),
    Route("GET", "/custom", "custom"),
    Route("GET", "/boom", "boom"),
    Route("GET", "/runs/{runId}/events", "stream", streaming=True),
    Route("GET", "/endless", "endless", streaming=True),
)


@pytest.fixture
def fake() -> Iterator[tuple[str, FakeFunctions]]:
    functions = FakeFunctions()
    front = LocalFront(routes=FAKE_ROUTES, invoke=functions)
    base_url = front.start("127.0.0.1", 0)
    yield base_url, functions
    front.stop()


def request(
    base_url: str, method: str, target: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    host = base_url.removeprefix("http://")
    conn = http.client.HTTPConnection(host, timeout=10)
    try:
        conn.request(method, target, body=body, headers=headers or {})
        response = conn.getresponse()
        headers: dict[str, str] = {}
        for name, value in response.getheaders():  # repeated headers joined, so duplicates show
            headers[name.lower()] = f"{headers[name.lower()]}, {value}" if name.lower() in headers else value
        return response.status, headers, response.read()
    finally:
        conn.close()


def test_front_builds_a_payload_v2_event(fake: tuple[str, FakeFunctions]) -> None:
    base_url, functions = fake
    status, headers, body = request(
        base_url,
        "POST",
        "/runs/acme%2Fr-1?x=1&x=2&flag=",
        body=b'{"a": 1}',
        headers={"X-Multi": "one", "Cookie": "s=1; t=2", "User-Agent": "pytest", "Content-Type": "application/json"},
    )

    assert (status, headers["content-type"]) == (200, "application/json")
    event = json.loads(body)["seen"]
    assert event["version"] == "2.0"
    assert event["routeKey"] == "POST /runs/{runId}"
    assert event["rawPath"] == "/runs/acme%2Fr-1"
    assert event["rawQueryString"] == "x=1&x=2&flag="
    assert event["queryStringParameters"] == {"x": "1,2", "flag": ""}
    assert event["pathParameters"] == {"runId": "acme/r-1"}
    assert event["headers"]["x-multi"] == "one"
    assert event["headers"]["content-type"] == "application/json"
    assert "cookie" not in event["headers"]
    assert event["cookies"] == ["s=1", "t=2"]
    assert event["body"] == '{"a": 1}'
    assert event["isBase64Encoded"] is False
    ctx = event["requestContext"]
    assert ctx["stage"] == "$default"
    assert ctx["http"] == {
        "method": "POST",
        "path": "/runs/acme%2Fr-1",
        "protocol": "HTTP/1.1",
        "sourceIp": "127.0.0.1",
        "userAgent": "pytest",
    }
    assert ctx["requestId"]


def test_front_binary_body_is_base64(fake: tuple[str, FakeFunctions]) -> None:
    base_url, _ = fake
    _, _, body = request(base_url, "POST", "/runs/r1", body=b"\xff\x00\xfe")

    event = json.loads(body)["seen"]
    assert (event["body"], event["isBase64Encoded"]) == ("/wD+", True)


def test_front_maps_status_headers_cookies_and_base64_body(fake: tuple[str, FakeFunctions]) -> None:
    base_url, _ = fake
    host = base_url.removeprefix("http://")
    conn = http.client.HTTPConnection(host, timeout=10)
    conn.request("GET", "/custom")
    response = conn.getresponse()

    assert response.status == 201
    assert response.getheader("X-Custom") == "yes"
    assert response.msg.get_all("Set-Cookie") == ["a=1", "b=2"]
    assert response.getheader("x-openwop-stream") is None
    assert response.read() == b"hello"
    conn.close()


def test_front_unknown_path_and_wrong_method_are_the_protocol_404(fake: tuple[str, FakeFunctions]) -> None:
    base_url, functions = fake
    for method, target in (("GET", "/nope"), ("DELETE", "/runs/r1"), ("GET", "/runs/a/b")):
        status, headers, body = request(base_url, method, target)
        assert status == 404
        assert headers["openwop-version"] == "2.0"
        assert json.loads(body) == {"error": "not_found", "message": "No route for this path."}
    assert functions.events == []


def test_front_handler_exception_is_a_500(fake: tuple[str, FakeFunctions]) -> None:
    base_url, _ = fake
    status, _, body = request(base_url, "GET", "/boom")

    assert (status, json.loads(body)) == (500, {"message": "Internal Server Error"})


def test_front_streams_until_the_handler_says_end(fake: tuple[str, FakeFunctions]) -> None:
    base_url, functions = fake

    status, headers, body = request(base_url, "GET", "/runs/acme%2Fr-1/events?resumable=true")

    assert status == 200
    assert headers["content-type"] == "text/event-stream"
    assert "content-length" not in headers
    assert "x-openwop-stream" not in headers
    assert headers["cache-control"] == "no-store"
    frames = [json.loads(line[6:]) for line in body.decode().splitlines() if line.startswith("data: ")]
    assert frames == [{"n": 1, "q": "resumable=true"}, {"n": 2, "q": "resumable=true"}, {"n": 3, "q": "resumable=true"}]
    assert functions.stream_calls == [None, "1", "2"]


def test_front_stream_resumes_from_the_clients_last_event_id(fake: tuple[str, FakeFunctions]) -> None:
    base_url, functions = fake

    _, _, body = request(base_url, "GET", "/runs/r1/events", headers={"Last-Event-ID": "1"})

    assert re.findall(r"^id: (\d+)$", body.decode(), re.M) == ["2", "3"]
    assert functions.stream_calls == ["1", "2"]


def test_front_stream_first_answer_not_200_is_sent_as_is(fake: tuple[str, FakeFunctions]) -> None:
    base_url, functions = fake

    status, headers, body = request(base_url, "GET", "/runs/missing/events")

    assert (status, headers["content-length"], json.loads(body)) == (404, str(len(body)), {"error": "not_found"})
    assert functions.stream_calls == [None]


def test_front_stream_flushes_each_answer_and_stops_when_the_client_leaves(fake: tuple[str, FakeFunctions]) -> None:
    base_url, functions = fake
    host, port = base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", "/endless")
    response = conn.getresponse()

    # The first frame arrives while the stream is still open
    assert response.fp.readline() == b"id: 1\n"

    # When the client goes away, the front stops calling the handler
    response.close()
    conn.close()
    settled = eventually(lambda: _stable(functions), timeout=30)
    assert settled


def _stable(functions: FakeFunctions) -> bool:
    """No handler call during a quiet window: a live stream calls the endless handler back to back (each answer has
    a body, so the front does not pause), ENDLESS_CALL_S each; 15 such calls' time without one means it stopped."""
    before = functions.endless_calls
    time.sleep(15 * ENDLESS_CALL_S)
    return functions.endless_calls == before


# -- serve -------------------------------------------------------------------------------------------------------


def test_serve_prints_urls_and_keys_and_answers_the_404_envelope(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MOTO_"))}
    env |= {"PYTHONPATH": str(ROOT), "OPENWOP_API_KEYS": "k1=tenant-one,k2=tenant-two"}
    errors = (tmp_path / "stderr.txt").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "shared.local.commands", "serve", "--port", "0", "--data-dir", str(tmp_path / "state")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
    )
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        # serve bootstraps moto and seeds the demos: seconds alone, longer on a loaded machine
        eventually(lambda: any("Ctrl-C" in line for line in lines), timeout=120)
        out = "".join(lines)
        base_url = re.search(r"local host: (http://\S+)", out).group(1)  # type: ignore[union-attr]
        assert "API key k1 -> tenant tenant-one" in out
        assert f"OPENWOP_BASE_URL={base_url} OPENWOP_API_KEY=k1 OPENWOP_TEST_TENANT_B_API_KEY=k2" in out
        assert f"viewer (signed in as tenant-one): {base_url}/host/openwop-serverless/ui/#key=k1\n" in out
        assert re.search(r"moto endpoint .*: http://127\.0\.0\.1:\d+", out)
        assert f"local state: {(tmp_path / 'state').resolve()} (kept across restarts" in out

        status, headers, body = request(base_url, "GET", "/definitely/not/a/route")
        assert (status, headers["openwop-version"]) == (404, "2.0")
        assert json.loads(body)["error"] == "not_found"
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        errors.close()
        assert code == 0, (tmp_path / "stderr.txt").read_text()[-3000:]


def _three_free_ports() -> int:
    """A port P with P, P+1 and P+2 free on loopback (the host and the demo's two servers)."""
    import socket

    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + 2 > 65535:
            continue
        free = True
        for port in (base, base + 1, base + 2):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    free = False
        if free:
            return base
    raise AssertionError("no three consecutive free ports")


def _occupy(port: int) -> Any:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", port))
    s.listen()
    return s


def test_serve_moves_the_demo_servers_to_free_ports_when_theirs_are_taken(tmp_path) -> None:
    from urllib.parse import urlsplit

    from tests.wire import raw

    # Given the two ports after P held by something else
    base = _three_free_ports()
    held = [_occupy(base + 1), _occupy(base + 2)]
    try:
        serve = ServeProcess(tmp_path, "--port", str(base), "--ephemeral").start()
        try:
            # Then the host serves on P, the demo servers on other ports, and says so
            assert serve.serving, serve.stderr[-3000:]
            assert serve.base_url == f"http://127.0.0.1:{base}"
            tools_url = serve.exports["DEMO_TOOLS_URL"]
            mcp_url = re.search(r"demo MCP server: (http://\S+)", serve.out).group(1)  # type: ignore[union-attr]
            moved = {urlsplit(tools_url).port, urlsplit(mcp_url).port}
            assert not moved & {base + 1, base + 2}, serve.out
            assert (
                f"note: port {base + 1} is taken" in serve.out
                and f"the demo tool server is on {tools_url}" in serve.out
            )
            assert (
                f"note: port {base + 2} is taken" in serve.out and f"the demo MCP server is on {mcp_url}" in serve.out
            )
            # and the demo works there: its run calls both servers where they really are
            run = raw(serve.base_url, "POST", "/runs", {"workflowId": "demo-support"}, key="dev-key-tenant-a")
            assert run.status == 201, run.text
            wire = run.json["runId"].replace("/", "~2F")
            status = eventually(
                lambda: (
                    (s := raw(serve.base_url, "GET", f"/runs/{wire}", key="dev-key-tenant-a").json["status"])
                    in ("completed", "failed")
                    and s
                ),
                timeout=60,
            )
            assert status == "completed"
            assert raw(tools_url, "GET", "/hits").json["count"] == 2
        finally:
            assert serve.stop() == 0
    finally:
        for s in held:
            s.close()


def test_serve_on_a_taken_port_is_one_line_and_exit_2(tmp_path) -> None:
    base = _three_free_ports()
    held = _occupy(base)
    try:
        serve = ServeProcess(tmp_path, "--port", str(base), "--ephemeral").start()
        assert serve.wait(60) == 2
        (line,) = serve.stderr.strip().splitlines()
        assert line == (
            f"error: cannot listen on 127.0.0.1:{base} (Address already in use); stop what uses port "
            f"{base} or choose another --port"
        )
        assert serve.out == ""
    finally:
        held.close()


def test_cli_parses_api_keys_and_rejects_malformed_entries() -> None:
    from shared.local.commands import parse_api_keys

    assert parse_api_keys("k1=tenant-one, k2=tenant-two,") == {"k1": "tenant-one", "k2": "tenant-two"}
    with pytest.raises(ValueError, match="not key=tenant"):
        parse_api_keys("k1")


def test_cli_operator_commands_exit_2_when_the_service_is_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from shared.local.commands import main

    monkeypatch.setitem(sys.modules, "shared.services.cli_ops", None)  # makes the import fail

    assert main(["suites", "put", "suite.json"]) == 2
    assert main(["runs", "delete", "tenant-a/r-1", "--tenant", "tenant-a"]) == 2
    assert capsys.readouterr().err.count("shared.services.cli_ops is not available") == 2
