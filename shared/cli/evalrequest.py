"""The ``POST /runs`` body of ``eval run``: the suite, the agent and its version, the baseline, eval modes and
fixture sources, checked before anything is sent."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from openwop_client import WopError
from openwop_client.types import CreateRunRequest
from rich.console import Console

from shared.cli.evalhost import EXTENSION, CliError, Host
from shared.protocol.channels import serving


def parse_agent(value: str) -> tuple[str, str | None]:
    """``ID[@VERSION]``."""
    agent, sep, version = value.partition("@")
    if not agent or (sep and not version):
        raise CliError(f"--agent {value!r} is not ID or ID@VERSION")
    return agent, (version or None)


def parse_fixtures(values: list[str]) -> dict[str, str] | None:
    out: dict[str, str] = {}
    for v in values:
        task, sep, run = v.partition("=")
        if not sep or not task or not run:
            raise CliError(f"--fixtures-from {v!r} is not TASK=RUN")
        out[task] = run
    return out or None


def parse_modes(values: list[str], baseline: str | None) -> list[str] | None:
    modes = [m.strip() for v in values for m in v.split(",") if m.strip()]
    if not modes and baseline:
        return ["golden", "regression"]  # a baseline needs the regression mode; golden is what this host grades
    return modes or None


def resolve_version(host: Host, agent_id: str, err: Console) -> str | None:
    """The version ``eval run`` pins when none is named, said on stderr: what ``stable`` serves once the agent has
    a deployment, else its newest registered version, as the host resolves an unpinned reference (None for an agent
    with no registered versions: a built-in or scripted one)."""
    wire = quote(agent_id, safe="")
    try:
        listed = host.raw(f"/agents/{wire}/deployments").get("deployments") or []
    except WopError as exc:
        if exc.status != 404:
            raise
        err.print(
            f"agent {agent_id}: no registered versions (a built-in agent); no version pinned",
            highlight=False,
            soft_wrap=True,
        )
        return None
    records = {str(d["version"]): {"state": d.get("state"), "channels": d.get("channels") or []} for d in listed}
    if all(r["state"] == "draft" for r in records.values()):
        version, why = str(host.raw(f"/agents/{wire}")["version"]), "its newest registered version: nothing deployed"
    else:
        got = serving(records, "stable")
        if got is None:
            raise CliError(f"agent {agent_id} has deployments and none serves stable: pass --agent-version")
        version, why = got, "what its stable channel serves"
    err.print(
        f"agent {agent_id}: no version named; running {version} ({why}); pin one with --agent-version",
        highlight=False,
        soft_wrap=True,
    )
    return version


def build_request(
    suite: str, agent: str, baseline: str | None, fixtures_from: list[str], modes: list[str], version: str | None = None
) -> CreateRunRequest:
    """The ``POST /runs`` body of ``eval run``: ``@VERSION`` (or ``version``) pins the agent version through the
    host's ``configurable.extensions`` section (sent only when a version is named)."""
    agent_id, named = parse_agent(agent)
    if version and named and version != named:
        raise CliError(f"--agent {agent!r} and --agent-version {version!r} name two versions")
    version = version or named
    kw: dict[str, Any] = {"mode": "eval", "evalSuiteRef": suite, "agentId": agent_id}
    if baseline:
        kw["baselineRunId"] = baseline
    evals_modes = parse_modes(modes, baseline)
    if evals_modes:
        kw["evalModes"] = evals_modes
    fixtures = parse_fixtures(fixtures_from)
    if fixtures:
        kw["fixtureRuns"] = fixtures
    if version:
        kw["configurable"] = {"version": 1, "extensions": {EXTENSION: {"agentVersion": version}}}
    return CreateRunRequest(**kw)
