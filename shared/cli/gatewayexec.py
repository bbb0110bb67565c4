"""Driving an external agent's command through the host's gateways: one run of ``--exec CMD`` for one session,
eval trial or replay fork, and the ``complete`` that ends it.

The host answers a session (or a trial, or a fork) with its gateway fields: ``token``, ``mcpUrl`` and
``openaiBaseUrl``. CMD runs once with them in its environment, the way any framework reads them:

- ``OPENWOP_MCP_URL`` and ``OPENWOP_GATEWAY_TOKEN``: the MCP server (Streamable HTTP, ``Authorization: Bearer``);
- ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` (the token): the OpenAI-compatible chat-completions endpoint;
- ``OPENWOP_TASK_INPUT``: the input as JSON, also written to CMD's stdin;
- ``OPENAI_AGENTS_DISABLE_TRACING=1``: the OpenAI Agents SDK would otherwise upload traces, with the token as the
  key, to OpenAI.

CMD's stdout is the output (JSON when it parses, else its text); a non-zero exit is a failure whose reason is the
tail of its stderr, with the token cut out (it is never sent back to the host nor printed).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib import error, request

STDERR_TAIL = 600  # characters of a failed command's stderr kept as the failure's reason
REDACTED = "[gateway token]"


@dataclass(frozen=True)
class Gateway:
    """What the host answers for a session, a waiting trial or a fork's session."""

    run_id: str
    token: str
    mcp_url: str
    openai_base_url: str

    @classmethod
    def of(cls, fields: dict[str, Any]) -> Gateway:
        return cls(
            str(fields.get("runId", "")), str(fields["token"]), str(fields["mcpUrl"]), str(fields["openaiBaseUrl"])
        )

    @property
    def root(self) -> str:
        """The gateway's root: ``mcpUrl`` without its ``/mcp``."""
        return self.mcp_url.rsplit("/", 1)[0]


def agent_env(gateway: Gateway, task_input: Any, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env.update(
        OPENWOP_MCP_URL=gateway.mcp_url,
        OPENWOP_GATEWAY_TOKEN=gateway.token,
        OPENAI_BASE_URL=gateway.openai_base_url,
        OPENAI_API_KEY=gateway.token,
        OPENWOP_TASK_INPUT=json.dumps(task_input),
        OPENAI_AGENTS_DISABLE_TRACING="1",
    )
    return env


def run_agent(cmd: str, gateway: Gateway, task_input: Any, timeout_s: float) -> dict[str, Any]:
    """Run CMD once; the ``complete`` body it earns: ``{"output": ...}`` or ``{"error": {"message": ...}}``."""
    try:
        done = subprocess.run(  # noqa: S602 - CMD is the user's own command line, run as they typed it
            cmd,
            shell=True,
            input=json.dumps(task_input),
            capture_output=True,
            text=True,
            env=agent_env(gateway, task_input),
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": {"message": f"the agent command did not finish within {timeout_s:g} s"}}
    if done.returncode != 0:
        tail = done.stderr.replace(gateway.token, REDACTED).strip()[-STDERR_TAIL:]
        reason = f"the agent command exited {done.returncode}" + (f": {tail}" if tail else "")
        return {"error": {"message": reason}}
    return {"output": parse_output(done.stdout)}


def parse_output(stdout: str) -> Any:
    text = stdout.strip()
    try:
        return json.loads(text)
    except ValueError:
        return text


class GatewayError(Exception):
    """The gateway refused ``complete`` (its status and the envelope's message) or could not be reached."""


def complete(gateway: Gateway, body: dict[str, Any], timeout_s: float = 30.0) -> dict[str, Any]:
    """``POST {root}/complete``: the session's (or trial's) end. The host's answer, ``{runId, status}``."""
    req = request.Request(
        gateway.root + "/complete",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {gateway.token}", "Content-Type": "application/json"},
    )
    try:
        with request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 - the host's own https/http URL
            answer: dict[str, Any] = json.loads(resp.read() or b"{}")
            return answer
    except error.HTTPError as exc:
        raise GatewayError(f"the gateway answered {exc.code}: {_message(exc.read())}") from None
    except (error.URLError, OSError) as exc:
        raise GatewayError(f"cannot reach the gateway: {exc}") from None


def _message(raw: bytes) -> str:
    try:
        doc = json.loads(raw)
    except ValueError:
        return raw[:200].decode("utf-8", "replace")
    return str(doc.get("message") or doc.get("error") or doc) if isinstance(doc, dict) else str(doc)


def drive_trials(
    list_waiting: Callable[[], list[dict[str, Any]]],
    is_done: Callable[[], bool],
    cmd: str,
    *,
    concurrency: int,
    timeout_s: float,
    progress: Callable[[str], None],
    poll_s: float = 0.5,
) -> int:
    """Run CMD once for every trial the host lists as waiting, ``concurrency`` at a time, until ``is_done``;
    each trial is completed with CMD's output or failure. A progress line per trial; the number of trials run."""
    started: set[tuple[str, int]] = set()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        running: list[Future[None]] = []
        while True:
            for trial in list_waiting():
                key = (str(trial["taskId"]), int(trial["trial"]))
                if key not in started:
                    started.add(key)
                    running.append(pool.submit(_one_trial, cmd, trial, timeout_s, progress))
            for done in [f for f in running if f.done()]:
                running.remove(done)
                done.result()
            if not running and is_done():
                return len(started)
            time.sleep(poll_s)


def _one_trial(cmd: str, trial: dict[str, Any], timeout_s: float, progress: Callable[[str], None]) -> None:
    gateway = Gateway.of(trial)
    body = run_agent(cmd, gateway, trial.get("input"), timeout_s)
    name = f"task {trial['taskId']} trial {trial['trial']}"
    try:
        complete(gateway, body)
    except GatewayError as exc:  # the trial ended meanwhile (expired, cancelled): the run says how
        progress(f"{name}: not completed ({exc})")
        return
    progress(f"{name}: " + ("output" if "output" in body else f"failed: {body['error']['message']}"))
