"""``openwop-serverless tools add`` and ``workflows add``: registering over HTTP without writing the body by hand.

    tools add --http URL --id ID --description TEXT [--safety-tier pure|read|write]
              [--replay-policy deterministic|idempotent|non-deterministic] [--input-schema FILE]
              [--output-schema FILE] [--method POST] [--header NAME=VALUE]... [--timeout-ms MS]
              [--credential-ref REF] [--title TEXT] [--version V]
    workflows add FILE

``tools add`` builds the ``POST /host/openwop-serverless/tools`` body (an HTTP tool; ``--input-schema`` defaults to
any object) and ``workflows add`` sends the file's workflow to ``POST /host/openwop-serverless/workflows``. The host
validates both (a refusal names the member, exit 3). The host and key as ``eval`` takes them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from shared.cli.clirun import OK, Verdict, group, pairs, run
from shared.cli.evalcli import ApiKey, Endpoint, JsonOut
from shared.cli.evalhost import EXTENSION, CliError, Host

EXIT_CODES = "Exit codes: 0 registered; 3 usage or connection error, or the host refused the body (it says where)."

tools_app = group("tools", "Register an HTTP tool on any OpenWOP host over HTTP.\n\n" + EXIT_CODES)
workflows_app = group("workflows", "Register a workflow on any OpenWOP host over HTTP.\n\n" + EXIT_CODES)


@tools_app.callback()
@workflows_app.callback()
def _group() -> None:
    """A group of commands, even of one (``tools add``, ``workflows add``), so the command is named."""


JsonFile = Annotated[Path, typer.Argument(metavar="FILE", help="a JSON file", dir_okay=False)]


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read JSON from {path}: {exc}") from exc


def tool_body(
    tool_id: str,
    url: str,
    description: str,
    options: dict[str, Any],
    headers: list[str],
    input_schema: Path | None,
    output_schema: Path | None,
) -> dict[str, Any]:
    """The registration body: the flags given, nothing else (the host's defaults fill the rest)."""
    source: dict[str, Any] = {"kind": "http", "url": url, "method": options.pop("method")}
    sent = pairs(headers, "--header")
    if sent:
        source["headers"] = sent
    if options.get("timeoutMs") is not None:
        source["timeoutMs"] = options.pop("timeoutMs")
    body: dict[str, Any] = {
        "toolId": tool_id,
        "description": description,
        "inputSchema": read_json(input_schema) if input_schema else {"type": "object"},
        "source": source,
    }
    if output_schema:
        body["outputSchema"] = read_json(output_schema)
    body.update({k: v for k, v in options.items() if v is not None})
    return body


@tools_app.command("add", epilog=EXIT_CODES)
def add_tool_command(
    url: Annotated[str, typer.Option("--http", metavar="URL", help="the tool's HTTP endpoint (the host POSTs to it)")],
    tool_id: Annotated[str, typer.Option("--id", metavar="ID", help="the toolId: <org>.<pack>:<tool>")],
    description: Annotated[str, typer.Option("--description", help="what the tool does (the model reads it)")],
    safety_tier: Annotated[
        Literal["pure", "read", "write"] | None,
        typer.Option("--safety-tier", help="pure, read or write (default write: never called live in eval)"),
    ] = None,
    replay_policy: Annotated[
        Literal["deterministic", "idempotent", "non-deterministic"] | None,
        typer.Option("--replay-policy", help="deterministic, idempotent or non-deterministic"),
    ] = None,
    input_schema: Annotated[
        Path | None, typer.Option("--input-schema", metavar="FILE", help="its arguments' JSON Schema", dir_okay=False)
    ] = None,
    output_schema: Annotated[
        Path | None, typer.Option("--output-schema", metavar="FILE", help="its answer's JSON Schema", dir_okay=False)
    ] = None,
    method: Annotated[
        Literal["GET", "POST", "PUT", "PATCH", "DELETE"], typer.Option("--method", help="the HTTP method")
    ] = "POST",
    header: Annotated[
        list[str] | None, typer.Option("--header", metavar="NAME=VALUE", help="a header sent on each call (repeatable)")
    ] = None,
    timeout_ms: Annotated[int | None, typer.Option("--timeout-ms", metavar="MS", help="100..30000")] = None,
    credential_ref: Annotated[
        str | None, typer.Option("--credential-ref", metavar="REF", help="a stored credential sent as its auth")
    ] = None,
    title: Annotated[str | None, typer.Option("--title", metavar="TEXT", help="a display name")] = None,
    version: Annotated[str | None, typer.Option("--version", metavar="V", help="the tool's version")] = None,
    endpoint: Endpoint = None,
    api_key: ApiKey = None,
    as_json: JsonOut = False,
) -> None:
    """Register (or replace) an HTTP tool; prints its id, safety tier and replay policy."""
    options = {
        "method": method,
        "timeoutMs": timeout_ms,
        "safetyTier": safety_tier,
        "replayPolicy": replay_policy,
        "credentialRef": credential_ref,
        "title": title,
        "version": version,
    }
    body = tool_body(tool_id, url, description, options, header or [], input_schema, output_schema)
    host = Host(endpoint, api_key)
    got = host.client._request_json("POST", f"/host/{EXTENSION}/tools", body=body)
    line = (
        f"tool {got.get('toolId', tool_id)}: safetyTier {got.get('safetyTier')}, replayPolicy {got.get('replayPolicy')}"
    )
    sys.stdout.write((json.dumps(got, indent=2) if as_json else line) + "\n")
    raise Verdict(OK)


@workflows_app.command("add", epilog=EXIT_CODES)
def add_workflow_command(
    file: JsonFile, endpoint: Endpoint = None, api_key: ApiKey = None, as_json: JsonOut = False
) -> None:
    """Register the workflow FILE holds (a workflow definition); prints its id, version and name."""
    doc = read_json(file)
    host = Host(endpoint, api_key)
    got = host.client._request_json("POST", f"/host/{EXTENSION}/workflows", body=doc)
    line = f"workflow {got.get('workflowId')}@{got.get('version')} {got.get('name')}"
    sys.stdout.write((json.dumps(got, indent=2) if as_json else line) + "\n")
    raise Verdict(OK)


APPS = {"tools": tools_app, "workflows": workflows_app}


def main(group: str, argv: list[str]) -> int:
    """Run ``tools`` or ``workflows``: 0 registered, 3 usage or connection error or a refused body."""
    return run(APPS[group], argv, f"openwop-serverless {group}")
