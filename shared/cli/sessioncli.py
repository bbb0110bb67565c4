"""``openwop-serverless session``: one production run of an external agent, driven by its own command.

    openwop-serverless session AGENT[@VERSION] --input JSON --exec "python agent.py" [--channel C]

Opens a session (``POST /host/openwop-serverless/agents/{agentId}/sessions``), runs CMD once with the session's
gateway in its environment (``shared/cli/gatewayexec.py``), and ends the session with CMD's output (or its
failure). The agent's tool calls through ``OPENWOP_MCP_URL`` and model calls through ``OPENAI_BASE_URL`` are
recorded on the session's run as executed, so the run can seed a suite (``eval suite from-runs``) like any other.

Exit codes: 0 the session completed; 1 the agent failed (its command exited non-zero or timed out); 3 usage or
connection error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer

from shared.cli.clirun import Verdict, run
from shared.cli.evalcli import ApiKey, Endpoint, JsonOut
from shared.cli.evalhost import EXTENSION, CliError, Host
from shared.cli.gatewayexec import Gateway, GatewayError, complete, run_agent

OK, FAILED, USAGE = 0, 1, 3
EXIT_CODES = "Exit codes: 0 the session completed; 1 the agent failed; 3 usage or connection error."


def read_input(value: str | None, file: Path | None) -> Any:
    """The session's input: ``--input`` as JSON (a bare word is a JSON string), or ``--input-file``."""
    if (value is None) == (file is None):
        raise CliError("give exactly one of --input and --input-file")
    text = value if value is not None else file.read_text() if file is not None else ""
    try:
        return json.loads(text)
    except ValueError:
        if file is not None:
            raise CliError(f"{file} is not JSON") from None
        return text


def open_session(host: Host, agent: str, task_input: Any, channel: str | None) -> dict[str, Any]:
    agent_id, _, version = agent.partition("@")
    body: dict[str, Any] = {"input": task_input}
    if version:
        body["version"] = version
    if channel:
        body["channel"] = channel
    path = f"/host/{EXTENSION}/agents/{quote(agent_id, safe='')}/sessions"
    return host.client._request_json("POST", path, body=body)


def command(
    agent: Annotated[str, typer.Argument(metavar="AGENT[@VERSION]", help="the external agent (and its version)")],
    exec_: Annotated[str, typer.Option("--exec", metavar="CMD", help="the agent's command line, run once")],
    input_: Annotated[
        str | None, typer.Option("--input", metavar="JSON", help="the session's input (JSON; a bare word is text)")
    ] = None,
    input_file: Annotated[
        Path | None, typer.Option("--input-file", metavar="FILE", dir_okay=False, help="the input, from a JSON file")
    ] = None,
    channel: Annotated[str | None, typer.Option("--channel", help="the channel whose version runs")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds CMD may run")] = 600.0,
    endpoint: Endpoint = None,
    api_key: ApiKey = None,
    as_json: JsonOut = False,
) -> None:
    task_input = read_input(input_, input_file)
    host = Host(endpoint, api_key)
    fields = open_session(host, agent, task_input, channel)
    gateway = Gateway.of(fields)
    body = run_agent(exec_, gateway, task_input, timeout)
    try:
        ended = complete(gateway, body)
    except GatewayError as exc:
        raise CliError(str(exc)) from None
    status = str(ended.get("status"))
    out = {
        "runId": gateway.run_id,
        "agentVersion": fields.get("resolvedAgentVersion"),
        "status": status,
        **body,
    }
    if as_json:
        sys.stdout.write(json.dumps(out) + "\n")
    else:
        line = f"{gateway.run_id} {status} ({agent.partition('@')[0]}@{fields.get('resolvedAgentVersion')})"
        if "error" in body:
            line += f": {body['error']['message']}"
        sys.stdout.write(line + "\n")
    raise Verdict(OK if status == "completed" else FAILED)


def replay_command(
    run: Annotated[str, typer.Argument(metavar="RUN", help="the session run to replay")],
    exec_: Annotated[str, typer.Option("--exec", metavar="CMD", help="the agent's command line, run once")],
    mode: Annotated[str, typer.Option("--mode", help="replay (recorded answers only) or branch (live again)")] = (
        "replay"
    ),
    timeout: Annotated[float, typer.Option("--timeout", help="seconds CMD may run")] = 600.0,
    endpoint: Endpoint = None,
    api_key: ApiKey = None,
    as_json: JsonOut = False,
) -> None:
    """Fork a session run and drive the fork with CMD: in replay every tool and model call is served from the
    source's record (none reaches a tool or a model); a call the source never made fails closed."""
    if mode not in ("replay", "branch"):
        raise CliError("--mode is replay or branch")
    host = Host(endpoint, api_key)
    fork = host.client._request_json("POST", f"/runs/{quote(run, safe='')}:fork", body={"mode": mode})
    fork_id = str(fork["runId"])
    fields = host.client._request_json("POST", f"/host/{EXTENSION}/runs/{quote(fork_id, safe='')}/session")
    gateway = Gateway.of(fields)
    body = run_agent(exec_, gateway, fields.get("input"), timeout)
    try:
        ended = complete(gateway, body)
    except GatewayError as exc:
        raise CliError(str(exc)) from None
    status = str(ended.get("status"))
    events = host.client._request_json("GET", f"/runs/{quote(fork_id, safe='')}/events/poll")
    diverged = [e for e in events.get("events", []) if e.get("type") == "replay.diverged"]
    out = {"runId": fork_id, "sourceRunId": run, "mode": mode, "status": status, "diverged": len(diverged), **body}
    if as_json:
        sys.stdout.write(json.dumps(out) + "\n")
    else:
        line = f"{fork_id} {status} ({mode} of {run})"
        if diverged:
            line += f", diverged {len(diverged)} time(s)"
        if "error" in body:
            line += f": {body['error']['message']}"
        sys.stdout.write(line + "\n")
    raise Verdict(OK if status == "completed" else FAILED)


def main(argv: list[str], which: str = "session") -> int:
    """Run ``session`` (or ``replay``); a usage or connection problem is one ``error:`` line and exit 3."""
    app = typer.Typer(add_completion=False, rich_markup_mode=None)
    if which == "replay":
        app.command(help=replay_command.__doc__, epilog=EXIT_CODES)(replay_command)
    else:
        app.command(
            help="One production session of an external agent, driven by its own command.\n\n" + EXIT_CODES,
            epilog=EXIT_CODES,
        )(command)
    return run(app, argv, f"openwop-serverless {which}")
