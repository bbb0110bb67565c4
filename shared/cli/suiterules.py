"""``openwop-serverless eval suite rules add|list|delete`` and ``eval suite draft show|publish``: sampling rules and
the draft they fill (decision 0117), over HTTP, with flags for every member of a rule.

    eval suite rules add SUITE --agent A [--workflow W] [--agent-version V] [--metadata K=V]... [--sample-rate R]
                                [--max-tasks N]
    eval suite rules list SUITE
    eval suite rules delete SUITE RULE_ID
    eval suite draft show SUITE
    eval suite draft publish SUITE [--version V]

Exit codes as every ``eval`` command: 0 done, 3 usage or connection error, or a refusal (one ``error:`` line).
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any
from urllib.parse import quote

import typer

from shared.cli.clirun import group, pairs
from shared.cli.evalcli import ApiKey, Endpoint, JsonOut
from shared.cli.suitecli import PATH, SuiteCliError, _request, suite_app, tenant_target

rules_app = group("rules", "sampling rules: production runs that complete become tasks of the suite's draft")
draft_app = group("draft", "the draft the sampling rules fill, and publishing it as the suite's next version")
Suite = Annotated[str, typer.Argument(metavar="SUITE", help="the suiteId")]


def mount() -> None:
    """Add ``rules`` and ``draft`` to ``eval suite`` (once)."""
    if not any(g.typer_instance is rules_app for g in suite_app.registered_groups):
        suite_app.add_typer(rules_app)
        suite_app.add_typer(draft_app)


def _call(endpoint: str | None, api_key: str | None, method: str, path: str, body: Any = None) -> Any:
    target = tenant_target(endpoint, api_key)
    if target is None:
        raise SuiteCliError("no host: pass --endpoint and --api-key or set OPENWOP_BASE_URL and OPENWOP_API_KEY")
    return _request(target, method, path, body)


def _print(doc: Any, as_json: bool, lines: list[str]) -> None:
    sys.stdout.write((json.dumps(doc, indent=2) if as_json else "\n".join(lines)) + "\n")


def rule_body(
    agent: str,
    workflow: str | None,
    agent_version: str | None,
    metadata: list[str],
    sample_rate: float | None,
    max_tasks: int | None,
) -> dict[str, Any]:
    """The rule's body from the flags (the host checks it against its closed schema)."""
    meta = pairs(metadata, "--metadata")
    filt = {
        k: v for k, v in (("workflowId", workflow), ("agentVersion", agent_version), ("metadata", meta or None)) if v
    }
    body: dict[str, Any] = {"agentId": agent}
    if filt:
        body["filter"] = filt
    if sample_rate is not None:
        body["sampleRate"] = sample_rate
    if max_tasks is not None:
        body["maxTasks"] = max_tasks
    return body


def rule_line(rule: dict[str, Any]) -> str:
    filt = " ".join(f"{k}={json.dumps(v) if isinstance(v, dict) else v}" for k, v in (rule.get("filter") or {}).items())
    return (
        f"{rule['ruleId']}  agent {rule['agentId']}  sample {rule['sampleRate']}  max {rule['maxTasks']} tasks"
        f"  {filt or '(every run)'}  since {rule['createdAt']}"
    )


@rules_app.command("add")
def add_rule_command(
    suite: Suite,
    agent: Annotated[str, typer.Option("--agent", metavar="AGENT", help="the agent whose production runs to sample")],
    workflow: Annotated[str | None, typer.Option("--workflow", metavar="ID", help="only runs of this workflow")] = None,
    agent_version: Annotated[
        str | None, typer.Option("--agent-version", metavar="V", help="only runs of this agent version")
    ] = None,
    metadata: Annotated[
        list[str] | None,
        typer.Option("--metadata", metavar="KEY=VALUE", help="only runs whose metadata has this (repeatable)"),
    ] = None,
    sample_rate: Annotated[
        float | None, typer.Option("--sample-rate", metavar="RATE", help="the share of runs kept, (0..1]; default 1")
    ] = None,
    max_tasks: Annotated[
        int | None, typer.Option("--max-tasks", metavar="N", help="the draft's size at most (1..500; default 100)")
    ] = None,
    endpoint: Endpoint = None,
    api_key: ApiKey = None,
    as_json: JsonOut = False,
) -> None:
    """Add a sampling rule to SUITE; prints the rule (its id deletes it)."""
    body = rule_body(agent, workflow, agent_version, metadata or [], sample_rate, max_tasks)
    got = _call(endpoint, api_key, "POST", f"{PATH}/{quote(suite, safe='')}/rules", body)
    _print(got, as_json, [rule_line(got)])


@rules_app.command("list")
def list_rules_command(
    suite: Suite, endpoint: Endpoint = None, api_key: ApiKey = None, as_json: JsonOut = False
) -> None:
    """SUITE's sampling rules."""
    got = _call(endpoint, api_key, "GET", f"{PATH}/{quote(suite, safe='')}/rules")
    _print(got, as_json, [rule_line(r) for r in got.get("rules") or []] or ["(no rules)"])


@rules_app.command("delete")
def delete_rule_command(
    suite: Suite,
    rule_id: Annotated[str, typer.Argument(metavar="RULE_ID")],
    endpoint: Endpoint = None,
    api_key: ApiKey = None,
) -> None:
    """Delete a sampling rule of SUITE (the tasks it already sampled stay in the draft)."""
    _call(endpoint, api_key, "DELETE", f"{PATH}/{quote(suite, safe='')}/rules/{quote(rule_id, safe='')}")
    print(f"deleted rule {rule_id}")


@draft_app.command("show")
def show_draft_command(
    suite: Suite, endpoint: Endpoint = None, api_key: ApiKey = None, as_json: JsonOut = False
) -> None:
    """SUITE's draft: the tasks sampled so far (each with its source run and input)."""
    got = _call(endpoint, api_key, "GET", f"{PATH}/{quote(suite, safe='')}/draft")
    head = f"{got['suiteId']} draft: {got['taskCount']} tasks"
    if got.get("targetAgentId"):
        head += f" (agent {got['targetAgentId']})"
    rows = [
        f"  {t.get('taskId')}  from {t.get('sourceRunId') or '-'}  input {json.dumps(t.get('input'))[:80]}"
        for t in got.get("tasks") or []
    ]
    _print(got, as_json, [head, *rows])


@draft_app.command("publish")
def publish_draft_command(
    suite: Suite,
    version: Annotated[
        str | None, typer.Option("--version", metavar="X.Y.Z", help="the new version (default: the next minor)")
    ] = None,
    endpoint: Endpoint = None,
    api_key: ApiKey = None,
    as_json: JsonOut = False,
) -> None:
    """Publish SUITE's draft as a new version (its latest version's tasks plus the draft's); the draft empties."""
    body = {"version": version} if version else {}
    got = _call(endpoint, api_key, "POST", f"{PATH}/{quote(suite, safe='')}:publish", body)
    _print(got, as_json, [f"{got['evalSuiteRef']} {got['taskCount']} tasks ({got['addedCount']} added)"])
