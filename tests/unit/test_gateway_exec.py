"""Driving an agent command through the gateway fields (``shared/cli/gatewayexec.py``): what CMD sees, what its
exit becomes, and the ``complete`` it sends (to a loopback server of the test's own)."""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from shared.cli.gatewayexec import REDACTED, Gateway, GatewayError, complete, drive_trials, run_agent

PY = f'"{sys.executable}" -c'


def _gateway(root: str = "http://127.0.0.1:9/host/openwop-serverless/gateway/r1") -> Gateway:
    return Gateway("r1", "owg_secret-token", root + "/mcp", root + "/v1")


def test_the_command_sees_the_gateway_in_its_environment_and_the_input_on_stdin() -> None:
    script = (
        "import json,os,sys; e=os.environ; print(json.dumps({k: e[k] for k in ("
        "'OPENWOP_MCP_URL','OPENWOP_GATEWAY_TOKEN','OPENAI_BASE_URL','OPENAI_API_KEY','OPENWOP_TASK_INPUT',"
        "'OPENAI_AGENTS_DISABLE_TRACING')} | {'stdin': json.load(sys.stdin)}))"
    )
    body = run_agent(f'{PY} "{script}"', _gateway(), {"customerId": "c-1"}, 30)
    seen = body["output"]
    assert seen["OPENWOP_MCP_URL"].endswith("/gateway/r1/mcp")
    assert seen["OPENAI_BASE_URL"].endswith("/gateway/r1/v1")
    assert seen["OPENWOP_GATEWAY_TOKEN"] == seen["OPENAI_API_KEY"] == "owg_secret-token"
    assert json.loads(seen["OPENWOP_TASK_INPUT"]) == seen["stdin"] == {"customerId": "c-1"}
    assert seen["OPENAI_AGENTS_DISABLE_TRACING"] == "1"


def test_text_that_is_not_json_is_the_output_as_text() -> None:
    assert run_agent(f"{PY} \"print('ticket opened')\"", _gateway(), None, 30) == {"output": "ticket opened"}


def test_a_failing_command_is_an_error_with_its_stderr_tail_and_never_the_token() -> None:
    script = "import os,sys; sys.stderr.write('boom with ' + os.environ['OPENAI_API_KEY']); sys.exit(4)"
    body = run_agent(f'{PY} "{script}"', _gateway(), {}, 30)
    message = body["error"]["message"]
    assert message.startswith("the agent command exited 4: boom with ")
    assert "owg_secret-token" not in message and REDACTED in message


def test_a_command_past_its_timeout_is_an_error() -> None:
    body = run_agent(f'{PY} "import time; time.sleep(30)"', _gateway(), {}, 0.5)
    assert body == {"error": {"message": "the agent command did not finish within 0.5 s"}}


class _Gateway:
    """A loopback stand-in for the host's ``complete``: it records each request and answers as configured."""

    def __init__(self, status: int = 200) -> None:
        self.requests: list[tuple[str, dict[str, str], Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw)))
                doc = (
                    {"runId": "r1", "status": "completed"}
                    if status == 200
                    else {"error": "run_terminal", "message": "The run has ended."}
                )
                out = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.root = f"http://127.0.0.1:{self.server.server_address[1]}/host/openwop-serverless/gateway/r1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_complete_posts_the_body_with_the_token_to_the_gateway_root() -> None:
    server = _Gateway()
    try:
        assert complete(_gateway(server.root), {"output": {"ok": True}}) == {"runId": "r1", "status": "completed"}
    finally:
        server.close()
    [(path, headers, body)] = server.requests
    assert path == "/host/openwop-serverless/gateway/r1/complete"
    assert headers["authorization"] == "Bearer owg_secret-token"
    assert body == {"output": {"ok": True}}


def test_a_refused_complete_is_a_gateway_error_with_the_hosts_message() -> None:
    server = _Gateway(status=409)
    try:
        with pytest.raises(GatewayError, match="409: The run has ended."):
            complete(_gateway(server.root), {"output": 1})
    finally:
        server.close()


def test_every_waiting_trial_runs_once_and_is_completed() -> None:
    server = _Gateway()
    trials = [
        {
            "taskId": t,
            "trial": n,
            "input": {"t": t},
            "token": f"tok-{t}-{n}",
            "mcpUrl": server.root + "/mcp",
            "openaiBaseUrl": server.root + "/v1",
        }
        for t in ("a", "b")
        for n in (0, 1)
    ]
    polls = {"n": 0}

    def waiting() -> list[dict[str, Any]]:
        polls["n"] += 1
        return trials if polls["n"] <= 3 else []  # listed again until completed: run once each all the same

    lines: list[str] = []
    try:
        ran = drive_trials(
            waiting,
            lambda: len(server.requests) == 4,
            f'{PY} "print(7)"',
            concurrency=2,
            timeout_s=30,
            progress=lines.append,
            poll_s=0.01,
        )
    finally:
        server.close()
    assert ran == 4
    assert sorted(h["authorization"] for _, h, _ in server.requests) == sorted(f"Bearer {t['token']}" for t in trials)
    assert all(body == {"output": 7} for _, _, body in server.requests)
    assert sorted(lines) == sorted(f"task {t} trial {n}: output" for t in ("a", "b") for n in (0, 1))
