"""Eval suites over HTTP, as a tenant (issue 24): ``openwop-serverless suites put|list|get`` with ``--base-url`` and
``--api-key`` (or ``OPENWOP_BASE_URL``/``OPENWOP_API_KEY``, the env the eval CLI reads), and
``openwop-serverless eval suite from-runs SUITE --agent A [--since 24h] [--sample 0.1] [--limit N] [--run-id ID ...]``.

Without a base URL and key, ``suites`` stays the operator command it was (host-wide, through the stack's resources:
``shared.services.cli_ops``). Every answer that is not 2xx is one ``error:`` line and a non-zero exit.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer

PATH = "/host/openwop-serverless/eval-suites"
_SINCE_RE = re.compile(r"^(\d+)([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class SuiteCliError(Exception):
    """One ``error:`` line."""


def tenant_target(base_url: str | None, api_key: str | None) -> tuple[str, str] | None:
    """The host and key a tenant command uses (flags, else the eval CLI's env), or None for the operator mode."""
    base_url = base_url or os.environ.get("OPENWOP_BASE_URL")
    api_key = api_key or os.environ.get("OPENWOP_API_KEY")
    if not base_url and not api_key:
        return None
    if not base_url or not api_key:
        raise SuiteCliError(
            "a tenant command needs both --base-url and --api-key (or OPENWOP_BASE_URL and OPENWOP_API_KEY)"
        )
    return base_url.rstrip("/"), api_key


def _request(target: tuple[str, str], method: str, path: str, body: Any = None) -> Any:
    from openwop_client import OpenwopClient, WopError

    client = OpenwopClient(target[0], target[1])
    try:
        return client._request_json(method, path, body=body)
    except WopError as err:
        if err.status == 0:
            raise SuiteCliError(f"cannot reach the host: {err.raw_text}") from err
        if err.envelope is not None:
            detail = f" {json.dumps(err.envelope.details)}" if err.envelope.details else ""
            raise SuiteCliError(
                f"the host answered {err.status} {err.envelope.error}: {err.envelope.message}{detail}"
            ) from err
        raise SuiteCliError(f"the host answered {err.status}") from err


def put(target: tuple[str, str], file: str) -> str:
    try:
        doc = json.loads(Path(file).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SuiteCliError(f"cannot read a JSON suite from {file}: {exc}") from exc
    return json.dumps(_request(target, "POST", PATH, doc))


def listing(target: tuple[str, str]) -> str:
    rows: list[dict[str, Any]] = []
    cursor = None
    for _ in range(10_000):  # each page holds at least one suite
        page = _request(target, "GET", f"{PATH}?limit=100" + (f"&cursor={quote(cursor, safe='')}" if cursor else ""))
        rows.extend(page.get("suites") or [])
        cursor = page.get("nextCursor")
        if not cursor:
            break
    return "\n".join(json.dumps(r) for r in rows) or "(no suites)"


def get(target: tuple[str, str], suite_id: str, version: str | None) -> str:
    sid = quote(suite_id, safe="")
    path = f"{PATH}/{sid}/versions/{quote(version, safe='')}" if version else f"{PATH}/{sid}"
    return json.dumps(_request(target, "GET", path))


def run_tenant(action: str, target: tuple[str, str], args: Any) -> int:
    """``suites put|list|get`` as a tenant: print the answer, exit 0; one ``error:`` line and exit 1 otherwise."""
    try:
        if action == "put":
            out = put(target, args.file)
        elif action == "list":
            out = listing(target)
        else:
            out = get(target, args.suite_id, args.version)
    except SuiteCliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(out)
    return 0


# --------------------------------------------------------------------------- eval suite from-runs


def since_iso(value: str, now_s: float) -> str:
    """``24h``, ``30m``, ``7d``, ``90s`` -> the RFC 3339 instant that long before ``now_s``."""
    m = _SINCE_RE.match(value.strip())
    if m is None:
        raise SuiteCliError(f"--since {value!r} is not a duration like 24h, 30m, 7d")
    at = now_s - int(m.group(1)) * _UNITS[m.group(2)]
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def _run_filter(
    version: str, since: str | None, sample: float | None, seed: str | None, limit: int | None, now_s: float
) -> dict[str, Any]:
    """The members that pick an agent's runs by version, start time, sample and count (no ``--run-id``)."""
    picked: dict[str, Any] = {}
    if version:
        picked["agentVersion"] = version
    if since:
        picked["startedAfter"] = since_iso(since, now_s)
    if sample is not None:
        picked["sampleRate"] = sample
        picked["seed"] = seed or "openwop"
    if limit is not None:
        picked["limit"] = limit
    return picked


def from_runs_body(
    agent: str,
    since: str | None,
    sample: float | None,
    seed: str | None,
    limit: int | None,
    run_ids: list[str],
    base: bool,
    strategy: str | None,
    now_s: float,
    label: str | None = None,
) -> dict[str, Any]:
    agent_id, sep, version = agent.partition("@")
    if not agent_id or (sep and not version):
        raise SuiteCliError(f"--agent {agent!r} is not ID or ID@VERSION")
    body: dict[str, Any] = {"agentId": agent_id}
    if run_ids:
        if since or sample is not None or limit is not None or version:
            raise SuiteCliError("--run-id names the runs: it takes no --since, --sample, --limit or @VERSION")
        body["runIds"] = run_ids
    else:
        body.update(_run_filter(version, since, sample, seed, limit, now_s))
    if base:
        body["base"] = "latest"
    if strategy:
        body["strategy"] = strategy
    if label:
        body["label"] = label
    return body


suite_app = typer.Typer(
    name="suite",
    help="eval suites on the host (openwop-serverless extension)",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


@suite_app.command("from-runs")
def from_runs_command(
    suite: Annotated[str, typer.Argument(help="the suiteId (a new version is made)")],
    agent: Annotated[str, typer.Option("--agent", metavar="ID[@VERSION]", help="the agent whose runs become tasks")],
    since: Annotated[
        str | None, typer.Option("--since", metavar="DURATION", help="runs started within, e.g. 24h")
    ] = None,
    sample: Annotated[
        float | None, typer.Option("--sample", metavar="RATE", help="keep this share of the runs (0..1]")
    ] = None,
    seed: Annotated[str | None, typer.Option("--seed", help="the sample's seed (the same seed, the same runs)")] = None,
    limit: Annotated[int | None, typer.Option("--limit", metavar="N", help="at most N runs")] = None,
    run_id: Annotated[list[str] | None, typer.Option("--run-id", metavar="ID", help="a run (repeatable)")] = None,
    append: Annotated[bool, typer.Option("--append", help="append to the latest version (base: latest)")] = False,
    strategy: Annotated[str | None, typer.Option("--strategy", help="exact (default), contains or json-match")] = None,
    label: Annotated[
        str | None,
        typer.Option(
            "--label",
            metavar="TEMPLATE",
            help="each task's label, e.g. '{input.customer}' ({input} or {input.a.b}: the run's input or a member); "
            "default: a short summary of the run's input",
        ),
    ] = None,
    endpoint: Annotated[
        str | None,
        typer.Option("--endpoint", "--base-url", metavar="URL", envvar="OPENWOP_BASE_URL", help="the host's base URL"),
    ] = None,
    api_key: Annotated[
        str | None, typer.Option("--api-key", metavar="KEY", envvar="OPENWOP_API_KEY", help="a tenant API key")
    ] = None,
) -> None:
    """Build a new suite version from recorded runs; print it and its task count."""
    body = from_runs_body(agent, since, sample, seed, limit, run_id or [], append, strategy, time.time(), label)
    target = tenant_target(endpoint, api_key)
    if target is None:
        raise SuiteCliError("no host: pass --endpoint and --api-key or set OPENWOP_BASE_URL and OPENWOP_API_KEY")
    out = _request(target, "POST", f"{PATH}/{quote(suite, safe='')}:from-runs", body)
    print(f"{out['evalSuiteRef']} {out['taskCount']} tasks ({out['addedCount']} added)")
