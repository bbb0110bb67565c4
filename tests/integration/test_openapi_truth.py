"""The served OpenAPI document tells the truth: schemathesis ``--checks all`` against the local host finds nothing.

Every check schemathesis has (its CLI, ``st run --checks all``): no 5xx; documented statuses, content types,
headers and bodies; every schema-valid request accepted and every schema-violating one refused; a method the
document does not declare for a path answered ``405`` with ``Allow``; a missing required header refused; an
unauthenticated request refused; a deleted resource gone; a created one readable. All four phases (examples,
coverage, fuzzing, stateful along the document's links), bounded examples, a fixed seed.

It runs as its own tenant (a key seeded here), so what it creates never shows in another test's listings.
What the schema cannot say is configured below, each with its reason, and nothing else is: the run fails on any
check failure or error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KEY = "schemathesis-key"
TENANT = "tenant-schemathesis"
MAX_EXAMPLES = 2
SEED = 20261203
MIN_TEST_CASES = 1000  # what the bounded run generates (about 2,000); fewer would mean operations went untested
# Registering an MCP server dials the URL it names and registering a webhook resolves (and may verify) its URL:
# generated URLs would make the host resolve and dial arbitrary names. Both are tested against loopback servers.
NOT_FUZZED = ("registerMcpServer", "registerWebhook")
# Operations whose schema-valid requests the host may still refuse, because validity depends on stored state or
# on semantics no JSON schema expresses. Only positive-data acceptance is widened, only for these; a
# schema-violating request must still be refused, and everything else is checked as for any operation.
STATE_DEPENDENT = {
    # RFC 0251/0252 §C: an evalSuiteRef, baselineRunId or fixtureRuns naming nothing usable is one uniform 400;
    # a callbackUrl is refused (no callback delivery, runs.md §Create: 400 details.field); residency 422
    "createRun": ("400", "422"),
    # the workflow graph (node types this host runs, edges between existing nodes, resolvable bindings)
    "registerWorkflow": ("400", "422"),
    # the official AgentManifest and what this host runs of it (an inline system prompt; a stored credentialRef)
    "registerAgentVersion": ("400",),
    # the deployment state machine (RFC 0082: what a version's state allows; 422 eval_gate_unmet)
    "transitionAgentDeployment": ("400", "422"),
    # a credentialRef must name a stored credential; the egress policy decides which URLs a tool may call
    "registerTool": ("400",),
    # taskIds unique within the suite (JSON Schema's uniqueItems compares whole items, not one member of them); a
    # task's sourceRunId must name a usable run of the tenant (RFC 0252 §C: one uniform 400)
    "putEvalSuite": ("400",),
    # the runs named or selected must be usable sources of the agent (RFC 0252 §C), and a base must exist
    "evalSuiteFromRuns": ("400",),
    # one agent per suite, at most 10 rules per suite and 100 per tenant (stored state); an empty draft
    "createEvalSuiteRule": ("400",),
    "publishEvalSuiteDraft": ("400",),
    # the run must be the caller's finished eval of this suite, its named tasks the suite's (one uniform 400)
    "evalSuiteAccept": ("400",),
}
POSITIVE_DEFAULT = ("2xx", "3xx", "401", "403", "404", "409", "429", "5xx")  # schemathesis' own default
# A refusal of schema-violating data: schemathesis' own list, and 426 (a client version below minClientVersion, the
# header's value the document's schema excludes: decision 0135)
NEGATIVE_STATUSES = ("400", "401", "403", "404", "405", "406", "409", "415", "422", "426", "428", "429", "5xx")


def _config(path: Path) -> None:
    lines = [
        "[checks.negative_data_rejection]",
        "expected-statuses = [" + ", ".join(f'"{st}"' for st in NEGATIVE_STATUSES) + "]",
        "",
    ]
    for operation_id, extra in STATE_DEPENDENT.items():
        statuses = ", ".join(f'"{s}"' for s in (*POSITIVE_DEFAULT, *extra))
        lines += [
            "[[operations]]",
            f'include-operation-id = "{operation_id}"',
            f"checks.positive_data_acceptance.expected-statuses = [{statuses}]",
            "",
        ]
    path.write_text("\n".join(lines), encoding="utf-8")


@pytest.mark.timeout(900)  # a bound for a loaded 2-core machine (the run takes ~220 s alone, 345 s measured loaded)
def test_schemathesis_checks_all_finds_nothing(host, tmp_path, record_property):
    from shared.local.commands import seed

    # Given the local host, its served document, and a tenant of this test's own
    assert seed({KEY: TENANT})
    config, report = tmp_path / "schemathesis.toml", tmp_path / "report.json"
    _config(config)
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(config),
        "run",
        f"{host.base_url}/openapi.json",
        "--checks",
        "all",
        "-H",
        f"Authorization: Bearer {KEY}",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        str(SEED),
        "--workers",
        "2",
        # a response slower than API Gateway's 30 s integration timeout would be a 503 deployed
        "--request-timeout",
        "60",
        "--max-response-time",
        "29",
        "--no-shrink",
        "--report",
        "json",
        "--report-json-path",
        str(report),
        *(arg for op in NOT_FUZZED for arg in ("--exclude-operation-id", op)),
    ]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "tests.schemathesis_hooks", "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    # When schemathesis runs every check over every phase
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=840, check=False)
    summary = json.loads(report.read_text("utf-8"))
    line = (
        f"schemathesis: {summary['test_cases']['generated']} test cases, "
        f"{len(summary['failures'])} failure kinds, {len(summary['errors'])} errors, "
        f"{summary['running_time']:.0f} s"
    )
    print(line)
    record_property("schemathesis", line)
    # Then no check failed, nothing errored, and the run was not vacuous
    detail = "\n".join(
        [
            *(f"{f['code']} {f['title']}: {', '.join(f['operations'])}" for f in summary["failures"]),
            *(line[:400] for line in done.stdout.splitlines() if line.strip()),
        ][:200]
    )
    assert summary["failures"] == [], detail
    assert summary["errors"] == [], detail
    assert done.returncode == 0, detail
    assert summary["test_cases"]["generated"] >= MIN_TEST_CASES, line
    assert all(p["status"] in ("success", "skip") for p in summary["phases"].values()), summary["phases"]


@pytest.mark.parametrize("operation_id", sorted(STATE_DEPENDENT))
def test_every_widened_operation_is_in_the_document(operation_id):
    # Given the served document
    from shared.services.openapi import document

    ids = {op["operationId"] for path in document()["paths"].values() for op in path.values()}
    # Then each operation the test widens exists (a rename would silently stop widening nothing)
    assert operation_id in ids
