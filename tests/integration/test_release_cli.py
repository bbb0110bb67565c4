"""The release loop from the CLI (issue 36 part 4), black-box against the local host over HTTP: ``agents promote``
refused with every reason of the gate (text and ``--json``), accepted, ``rollback`` and ``history``; ``agents list``;
``eval suite rules add|list|delete`` and ``eval suite draft show|publish``; ``tools add`` and ``workflows add``, then
a run that uses both. Exit codes: 0 done, 1 refused, 3 usage or connection error."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from openwop_client.types import CreateRunRequest

from shared.local.ddb_streams import wait_for_stream_idle
from tests.integration.test_agent_deployments import _agent_with_evals
from tests.wire import raw, wait_terminal
from tests.workflows import scripted_agent

SCRIPTED = "conformance-eval-agent"


def cli(host: Any, *args: str) -> int:
    from shared.local.commands import main

    return main([*args, "--endpoint", host.base_url, "--api-key", host.key_a])


@pytest.fixture(scope="module")
def agent(host):
    return _agent_with_evals(host)


def test_promote_refused_prints_every_reason_and_json_carries_them(host, agent, capsys):
    agent_id, evals = agent
    # When 3.0.0 (it answers wrong) is promoted on its own regressed eval
    assert cli(host, "agents", "promote", f"{agent_id}@3.0.0", "--eval", evals["v3"]) == 1
    out = capsys.readouterr().out
    # Then the refusal names every reason, the tasks they are about included
    assert out.splitlines()[0].startswith(f"refused: {agent_id}@3.0.0 was not promoted (eval_gate_unmet)")
    assert [line.split(":")[0].strip("- ") for line in out.splitlines()[1:]] == [
        "not_passed",
        "regressed",
        "score_fell",
    ]
    assert "(tasks: q)" in out.splitlines()[1] and "(tasks: q)" in out.splitlines()[2]
    # And --json is one document carrying reasons[] (an eval of another version: wrong_version)
    assert cli(host, "agents", "promote", f"{agent_id}@2.0.0", "--eval", evals["v1"], "--json") == 1
    doc = json.loads(capsys.readouterr().out)
    assert (doc["promoted"], doc["error"], doc["version"]) == (False, "eval_gate_unmet", "2.0.0")
    assert [r["code"] for r in doc["details"]["reasons"]] == ["wrong_version"]
    assert doc["details"]["reasons"][0]["message"] == "The eval run evaluated version 1.0.0, not 2.0.0."
    # And a foreign id is the uniform not_found, the id never echoed
    assert cli(host, "agents", "promote", f"{agent_id}@2.0.0", "--eval", "tenant-b/r-zz", "--json") == 1
    doc = json.loads(capsys.readouterr().out)
    assert [r["code"] for r in doc["details"]["reasons"]] == ["not_found"]
    assert "r-zz" not in json.dumps(doc["details"])
    # And a cancelled eval of another agent: both reasons, not only the first
    from tests.integration.test_eval_cli import _slow_suite
    from tests.integration.test_eval_runs import AGENT, eval_request

    client = host.client(host.key_a)
    cancelled = client.runs_create(eval_request(_slow_suite(host), agentId=AGENT)).runId
    client.runs_cancel(cancelled)
    assert wait_terminal(client, cancelled).status == "cancelled"
    assert cli(host, "agents", "promote", f"{agent_id}@2.0.0", "--eval", cancelled, "--json") == 1
    doc = json.loads(capsys.readouterr().out)
    assert [r["code"] for r in doc["details"]["reasons"]] == ["other_agent", "unfinished"]
    assert doc["details"]["reasons"][1]["message"] == "The eval run has no summary to be evidence: it is cancelled."
    # Usage and connection errors are exit 3
    assert cli(host, "agents", "promote", agent_id, "--eval", evals["v1"]) == 3
    assert "is not AGENT@VERSION" in capsys.readouterr().err
    from shared.local.commands import main

    assert main(["agents", "list", "--endpoint", "http://127.0.0.1:9", "--api-key", "k"]) == 3
    assert capsys.readouterr().err.startswith("error: cannot reach the host")


def test_promote_then_rollback_then_history(host, agent, capsys):
    agent_id, evals = agent
    # When 1.0.0 then 2.0.0 are promoted, each on its own clean eval
    assert cli(host, "agents", "promote", f"{agent_id}@1.0.0", "--eval", evals["v1"]) == 0
    assert capsys.readouterr().out.strip() == f"{agent_id}@1.0.0: active on stable (evidence {evals['v1']})"
    assert cli(host, "agents", "promote", f"{agent_id}@2.0.0", "--eval", evals["v2"], "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["promoted"] is True and doc["deployment"]["channels"] == ["stable"]
    # Then the host's records say so
    listed = raw(host.base_url, "GET", f"/agents/{agent_id}/deployments", key=host.key_a).json["deployments"]
    assert {d["version"]: d.get("channels") for d in listed}["2.0.0"] == ["stable"]
    # When stable is rolled back
    assert cli(host, "agents", "rollback", agent_id) == 0
    assert capsys.readouterr().out.strip() == f"{agent_id} stable: 1.0.0 (rolled back from 2.0.0)"
    # Then history lists every change, and a second rollback (nothing earlier still active) is refused: exit 1
    assert cli(host, "agents", "history", agent_id, "--json") == 0
    history = json.loads(capsys.readouterr().out)["history"]
    assert [(e["version"], e["evalRunId"]) for e in history] == [
        ("1.0.0", evals["v1"]),
        ("2.0.0", evals["v2"]),
        ("1.0.0", evals["v1"]),
    ]
    assert cli(host, "agents", "history", agent_id) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{agent_id} stable: 3 changes" and " 2.0.0  eval " in lines[2]
    assert cli(host, "agents", "rollback", agent_id) == 1
    assert capsys.readouterr().out.startswith("refused: The channel has no earlier deployment")
    # And agents list shows what each channel serves
    assert cli(host, "agents", "list", "--json") == 0
    row = next(a for a in json.loads(capsys.readouterr().out)["agents"] if a["agentId"] == agent_id)
    assert row["versions"] == ["1.0.0", "2.0.0", "3.0.0"] and row["channels"] == {"stable": "1.0.0"}
    assert row["states"] == {"1.0.0": "active", "2.0.0": "rolled-back", "3.0.0": "draft"}
    assert cli(host, "agents", "list") == 0
    assert f"{agent_id}  versions 1.0.0, 2.0.0, 3.0.0  stable 1.0.0" in capsys.readouterr().out


def _settled() -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not wait_for_stream_idle(timeout=5.0):
        pass


def test_tools_add_workflows_add_rules_and_the_draft_through_the_cli(host, server, tmp_path, capsys):
    tools, url = server
    org = "r" + uuid.uuid4().hex[:8]
    tool_id = f"{org}.crm:lookup"
    schema = tmp_path / "input.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"customerId": {"type": "string"}}}))
    # When a tool is added from flags and a workflow from a file
    code = cli(
        host,
        "tools",
        "add",
        "--http",
        url + "/crm/lookup",
        "--id",
        tool_id,
        "--description",
        "Look a customer up",
        "--safety-tier",
        "read",
        "--replay-policy",
        "idempotent",
        "--input-schema",
        str(schema),
    )
    assert code == 0
    assert capsys.readouterr().out.strip() == f"tool {tool_id}: safetyTier read, replayPolicy idempotent"
    got = raw(host.base_url, "GET", f"/tools/{tool_id}", key=host.key_a).json
    assert (got["safetyTier"], got["replayPolicy"], got["inputSchema"]["properties"]) == (
        "read",
        "idempotent",
        {"customerId": {"type": "string"}},
    )
    wf = tmp_path / "workflow.json"
    workflow_id = f"wf-{org}"
    wf.write_text(json.dumps(scripted_agent(workflow_id)))
    assert cli(host, "workflows", "add", str(wf)) == 0
    assert capsys.readouterr().out.startswith(f"workflow {workflow_id}@")
    # And a sampling rule is added for the suite, listed, and the runs of the workflow complete
    suite = f"tests.{org}.evals.sampled"
    assert cli(host, "eval", "suite", "rules", "add", suite, "--agent", SCRIPTED, "--workflow", workflow_id) == 0
    rule_line = capsys.readouterr().out.strip()
    rule_id = rule_line.split()[0]
    assert f"agent {SCRIPTED}  sample 1  max 100 tasks  workflowId={workflow_id}" in rule_line
    assert cli(host, "eval", "suite", "rules", "list", suite, "--json") == 0
    assert [r["ruleId"] for r in json.loads(capsys.readouterr().out)["rules"]] == [rule_id]
    client = host.client(host.key_a)
    before = tools.count("/crm/lookup")
    script = {"calls": [{"tool": tool_id, "args": {"customerId": "c-1"}}], "answer": "found c-1"}
    run = client.runs_create(CreateRunRequest(workflowId=workflow_id, inputs={"script": script}))
    assert wait_terminal(client, run.runId, timeout=120).status == "completed"
    # Then the tool the CLI added was called, and the run sampled into the draft
    assert tools.count("/crm/lookup") == before + 1
    _settled()
    assert cli(host, "eval", "suite", "draft", "show", suite) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[0] == f"{suite} draft: 1 tasks (agent {SCRIPTED})"
    assert f"from {run.runId}" in shown[1]
    assert cli(host, "eval", "suite", "draft", "show", suite, "--json") == 0
    assert [t["sourceRunId"] for t in json.loads(capsys.readouterr().out)["tasks"]] == [run.runId]
    # When the draft is published and the rule deleted
    assert cli(host, "eval", "suite", "draft", "publish", suite) == 0
    assert capsys.readouterr().out.strip() == f"{suite}@1.0.0 1 tasks (1 added)"
    assert cli(host, "eval", "suite", "rules", "delete", suite, rule_id) == 0
    assert capsys.readouterr().out.strip() == f"deleted rule {rule_id}"
    # Then the version exists, the draft is empty, no rule is left, and a second delete is one error line, exit 3
    version = raw(host.base_url, "GET", f"/host/openwop-serverless/eval-suites/{suite}/versions/1.0.0", key=host.key_a)
    assert version.status == 200 and [t["sourceRunId"] for t in version.json["tasks"]] == [run.runId]
    assert cli(host, "eval", "suite", "draft", "show", suite, "--json") == 0
    assert json.loads(capsys.readouterr().out)["taskCount"] == 0
    assert cli(host, "eval", "suite", "rules", "list", suite) == 0
    assert capsys.readouterr().out.strip() == "(no rules)"
    assert cli(host, "eval", "suite", "rules", "delete", suite, rule_id) == 3
    assert "404" in capsys.readouterr().err
    # And a body the host refuses says where, exit 3
    assert cli(host, "tools", "add", "--http", url, "--id", "Bad Id", "--description", "x") == 3
    assert "400 validation_error" in capsys.readouterr().err
