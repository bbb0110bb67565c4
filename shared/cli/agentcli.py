"""``openwop-serverless agents``: the release steps over HTTP (issue 36 part 4), thin clients of the deployment routes.

    agents promote AGENT@VERSION --eval RUN [--channel stable|canary] [--to-state active] [--reason TEXT]
    agents rollback AGENT [--channel stable|canary]
    agents history AGENT [--channel stable|canary]
    agents list

``promote`` is ``POST /agents/{agentId}/deployments`` (``transition: promote``); a refusal of the promotion gate
(``422 eval_gate_unmet``) prints every reason the host gives (``details.reasons``) and exits 1. ``rollback`` and
``history`` are the host's channel routes (``.../deployments/{channel}:rollback`` and ``.../history``). Human output by
default, ``--json`` for one JSON document. The host and key as ``eval`` takes them (``--endpoint``/``--api-key`` or
``OPENWOP_BASE_URL``/``OPENWOP_API_KEY``).
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any
from urllib.parse import quote

import typer
from openwop_client import WopError

from shared.cli.clirun import OK, Verdict, group, run
from shared.cli.evalcli import ApiKey, Endpoint, JsonOut
from shared.cli.evalhost import EXTENSION, Host

REFUSED = 1
EXIT_CODES = "Exit codes: 0 done; 1 refused (the promotion gate, or no earlier deployment to roll back to); 3 usage or connection error."
GATE = "eval_gate_unmet"
NO_PREVIOUS = "openwop-serverless.no_previous_deployment"

app = group(
    "agents",
    "Agents' releases on any OpenWOP host over HTTP: promote a version with its eval as evidence, roll a channel "
    "back, read a channel's history.\n\n" + EXIT_CODES,
)
Channel = Annotated[str, typer.Option("--channel", metavar="CHANNEL", help="stable or canary")]


def _emit(doc: dict[str, Any], as_json: bool, lines: list[str], code: int = OK) -> None:
    sys.stdout.write((json.dumps(doc, indent=2) if as_json else "\n".join(lines)) + "\n")
    raise Verdict(code)


def _refusal(err: WopError, wanted: str) -> dict[str, Any] | None:
    """The envelope of a refusal with the code ``wanted`` (None for any other failure)."""
    env = err.envelope
    if err.status == 0 or env is None or env.error != wanted:
        return None
    return {"error": env.error, "message": env.message, "details": env.details or {}}


def reason_line(reason: dict[str, Any]) -> str:
    """One gate reason for a human: its code, its message, and the tasks it names (and how many more)."""
    line = f"  - {reason.get('code')}: {reason.get('message')}"
    tasks = [str(t) for t in reason.get("tasks") or []]
    if tasks:
        more = int(reason.get("taskCount") or len(tasks)) - len(tasks)
        line += f" (tasks: {', '.join(tasks)}{f' and {more} more' if more > 0 else ''})"
    return line


def _agent_path(agent_id: str) -> str:
    return f"/agents/{quote(agent_id, safe='')}"


def _channel_path(agent_id: str, channel: str) -> str:
    return f"/host/{EXTENSION}/agents/{quote(agent_id, safe='')}/deployments/{quote(channel, safe='')}"


@app.command("promote", epilog=EXIT_CODES)
def promote_command(
    target: Annotated[str, typer.Argument(metavar="AGENT@VERSION", help="the agent and the version to promote")],
    eval_run: Annotated[
        str | None,
        typer.Option("--eval", metavar="RUN", help="the eval run of exactly this version that is the evidence"),
    ] = None,
    channel: Channel = "stable",
    to_state: Annotated[
        str, typer.Option("--to-state", metavar="STATE", help="test, staged or active (staged and active need --eval)")
    ] = "active",
    reason: Annotated[str | None, typer.Option("--reason", help="why (stored on the deployment)")] = None,
    endpoint: Endpoint = None,
    api_key: ApiKey = None,
    as_json: JsonOut = False,
) -> None:
    """Promote AGENT@VERSION (to active on --channel by default); a refusal prints every reason of the gate."""
    agent_id, _, version = target.partition("@")
    if not agent_id or not version:
        raise typer.BadParameter(f"{target!r} is not AGENT@VERSION", param_hint="AGENT@VERSION")
    host = Host(endpoint, api_key)
    body: dict[str, Any] = {"version": version, "transition": "promote", "toState": to_state}
    if to_state == "active":
        body["channel"] = channel
    if eval_run:
        body["evalRunId"] = eval_run
    if reason:
        body["reason"] = reason
    try:
        got = host.client._request_json("POST", f"{_agent_path(agent_id)}/deployments", body=body)
    except WopError as err:
        refused = _refusal(err, GATE)
        if refused is None:
            raise
        reasons = list(refused["details"].get("reasons") or [])
        doc = {"promoted": False, "agentId": agent_id, "version": version, "evalRunId": eval_run, **refused}
        head = f"refused: {agent_id}@{version} was not promoted ({GATE}): {refused['message']}"
        _emit(doc, as_json, [head, *(reason_line(r) for r in reasons)], REFUSED)
    where = f" on {', '.join(got.get('channels') or [])}" if got.get("channels") else ""
    evidence = f" (evidence {got['evalRunId']})" if got.get("evalRunId") else ""
    _emit({"promoted": True, "deployment": got}, as_json, [f"{agent_id}@{version}: {got['state']}{where}{evidence}"])


@app.command("rollback", epilog=EXIT_CODES)
def rollback_command(
    agent_id: Annotated[str, typer.Argument(metavar="AGENT")],
    channel: Channel = "stable",
    endpoint: Endpoint = None,
    api_key: ApiKey = None,
    as_json: JsonOut = False,
) -> None:
    """Return CHANNEL to the previous version it served that is still active; the serving one becomes rolled-back."""
    host = Host(endpoint, api_key)
    try:
        got = host.client._request_json("POST", f"{_channel_path(agent_id, channel)}:rollback")
    except WopError as err:
        refused = _refusal(err, NO_PREVIOUS)
        if refused is None:
            raise
        _emit({"rolledBack": False, **refused}, as_json, [f"refused: {refused['message']}"], REFUSED)
    line = f"{agent_id} {channel}: {got['version']} (rolled back from {got['rolledBackVersion']})"
    _emit(got, as_json, [line])


@app.command("history", epilog=EXIT_CODES)
def history_command(
    agent_id: Annotated[str, typer.Argument(metavar="AGENT")],
    channel: Channel = "stable",
    endpoint: Endpoint = None,
    api_key: ApiKey = None,
    as_json: JsonOut = False,
) -> None:
    """Every change of the version CHANNEL serves, oldest first: when, the version, its evidence, the key."""
    got = Host(endpoint, api_key).client._request_json("GET", f"{_channel_path(agent_id, channel)}/history")
    rows = [
        f"{e['at']}  {e.get('version') or '(nothing)'}  eval {e.get('evalRunId') or '-'}  key {e.get('keyId') or '-'}"
        for e in got.get("history") or []
    ]
    _emit(got, as_json, [f"{agent_id} {channel}: {len(rows)} changes", *rows])


@app.command("list", epilog=EXIT_CODES)
def list_command(endpoint: Endpoint = None, api_key: ApiKey = None, as_json: JsonOut = False) -> None:
    """The agents: each one's versions and what its channels serve (registered versions' deployments)."""
    host = Host(endpoint, api_key)
    agents: list[dict[str, Any]] = []
    for entry in host.client._request_json("GET", "/agents").get("agents") or []:
        row: dict[str, Any] = {"agentId": entry["agentId"], "versions": list(entry.get("versions") or [])}
        if row["versions"]:
            listed = host.client._request_json("GET", f"{_agent_path(entry['agentId'])}/deployments")
            deployments = listed.get("deployments") or []
            row["channels"] = {ch: d["version"] for d in deployments for ch in d.get("channels") or []}
            row["states"] = {d["version"]: d["state"] for d in deployments}
        agents.append(row)
    lines = [
        f"{a['agentId']}  versions {', '.join(a['versions']) or '(built-in)'}"
        + "".join(f"  {ch} {v}" for ch, v in sorted((a.get("channels") or {}).items()))
        for a in agents
    ]
    _emit({"agents": agents}, as_json, lines or ["(no agents)"])


def main(argv: list[str]) -> int:
    """Run the ``agents`` group: 0 done, 1 refused, 3 usage or connection error (one ``error:`` line)."""
    return run(app, argv, "openwop-serverless agents")
