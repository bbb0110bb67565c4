"""Smoke test of a deployed stack: ``make e2e STAGE=qa REGION=eu-west-1`` (AWS credentials needed; never part of
``make test``, where the ``e2e`` marker is deselected by the default ``-m 'not e2e'``).

Against the stack ``OPENWOP_E2E_STACK`` in ``OPENWOP_E2E_REGION``, as an operator and then a tenant would:
1. read the stack's outputs (the CLI's ``--stack`` path) and seed the conformance fixtures
   (``openwop-serverless seed conformance``; refused for a prod stage);
2. create an API key for a fresh tenant with ``openwop-serverless keys create``;
3. run the README tour's recorded-fixture part through ``openwop-client``: a recorded eval, an eval served that
   run's calls (RFC 0252), a baseline and a candidate (RFC 0251);
4. cancel a side-effecting run and fork it in replay mode: the effect fails closed;
5. erase every run it made (``DELETE /runs/{runId}``, then 404) and revoke its key.

Run without the two variables (``pytest -m e2e`` alone), every test fails with the instruction: never a skip.
"""

from __future__ import annotations

import io
import json
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

STACK_VAR, REGION_VAR = "OPENWOP_E2E_STACK", "OPENWOP_E2E_REGION"


@dataclass
class Deployed:
    stack: str
    region: str
    base_url: str
    tenant: str
    key: str
    key_id: str
    runs: list[str] = field(default_factory=list)

    def client(self) -> Any:
        from openwop_client import OpenwopClient

        return OpenwopClient(self.base_url, self.key)


def cli(*args: str) -> str:
    """``openwop-serverless ARGS --stack S --region R`` in this process; its stdout (exit status 0 asserted)."""
    from shared.local.commands import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main([*args, "--stack", os.environ[STACK_VAR], "--region", os.environ[REGION_VAR]])
    assert code == 0, err.getvalue()
    return out.getvalue()


@pytest.fixture(scope="module")
def deployed() -> Iterator[Deployed]:
    stack, region = os.environ.get(STACK_VAR), os.environ.get(REGION_VAR)
    if not stack or not region:
        pytest.fail(f"set {STACK_VAR} and {REGION_VAR}: run `make e2e STAGE=<stage> REGION=<region>`")
    from shared import settings
    from shared.wiring import build_stack_outputs

    outputs = build_stack_outputs(region).read_outputs(stack)
    assert settings.API_URL_OUTPUT in outputs, sorted(outputs)
    cli("seed", "conformance")
    tenant = f"e2e-{uuid.uuid4().hex[:12]}"
    created = json.loads(cli("keys", "create", "--tenant", tenant, "--name", "e2e"))
    assert created["tenant"] == tenant and created["apiKey"]
    env = Deployed(
        stack, region, outputs[settings.API_URL_OUTPUT].rstrip("/"), tenant, created["apiKey"], created["keyId"]
    )
    try:
        yield env
    finally:
        from shared.protocol.ids import project_id
        from tests.wire import raw

        for run_id in reversed(env.runs):  # forks first; erasing is idempotent
            raw(env.base_url, "DELETE", f"/runs/{project_id(run_id)}", key=env.key)
        cli("keys", "revoke", env.key_id)


def finished(client: Any, run_id: str, timeout: float = 180.0) -> Any:
    deadline = time.monotonic() + timeout
    while (snap := client.runs_get(run_id)).status not in ("completed", "failed", "cancelled"):
        assert time.monotonic() < deadline, f"{run_id} still {snap.status}"
        time.sleep(1.0)
    return snap


def test_discovery_answers_and_the_new_key_authenticates(deployed: Deployed) -> None:
    from tests.wire import raw

    assert "2.0" in json.loads(raw(deployed.base_url, "GET", "/.well-known/openwop").text)["protocolVersions"]
    assert raw(deployed.base_url, "GET", "/runs", key=deployed.key).status == 200
    assert raw(deployed.base_url, "GET", "/runs", key="owk_not-a-key").status == 401


def test_recorded_fixtures_and_a_baseline_through_openwop_client(deployed: Deployed) -> None:
    from openwop_client.types import CreateRunRequest

    c = deployed.client()
    agent = "conformance-eval-agent"
    ev = c.runs_create(CreateRunRequest(mode="eval", evalSuiteRef="conformance-eval-recorded-source", agentId=agent))
    deployed.runs.append(ev.runId)
    assert finished(c, ev.runId).status == "completed"
    rep = c.runs_create(
        CreateRunRequest(
            mode="eval",
            evalSuiteRef="conformance-eval-recorded-replay",
            agentId=agent,
            fixtureRuns={"record": ev.runId},
        )
    )
    deployed.runs.append(rep.runId)
    assert finished(c, rep.runId).status == "completed"
    assert c.runs_eval_summary(rep.runId).aggregateScore == 1.0
    base = c.runs_create(CreateRunRequest(mode="eval", evalSuiteRef="conformance-eval-regression-base", agentId=agent))
    deployed.runs.append(base.runId)
    finished(c, base.runId)
    cand = c.runs_create(
        CreateRunRequest(
            mode="eval",
            evalSuiteRef="conformance-eval-regression-candidate",
            agentId=agent,
            evalModes=["golden", "regression"],
            baselineRunId=base.runId,
        )
    )
    deployed.runs.append(cand.runId)
    finished(c, cand.runId)
    assert c.runs_eval_summary(cand.runId).regression.scoreDelta == pytest.approx(1 / 3)


def test_a_cancelled_side_effect_replays_fail_closed_and_erasure_removes_the_runs(deployed: Deployed) -> None:
    from openwop_client.types import CreateRunRequest, ForkRunRequest

    from shared.protocol.ids import project_id
    from tests.wire import raw

    c = deployed.client()
    run = c.runs_create(CreateRunRequest(workflowId="conformance-replay-side-effect", inputs={"delayMs": 5000}))
    deployed.runs.append(run.runId)
    c.runs_cancel(run.runId)
    assert finished(c, run.runId).status == "cancelled"
    fork = c.runs_fork(run.runId, ForkRunRequest(fromSeq=0, mode="replay"))
    deployed.runs.append(fork.runId)
    snap = finished(c, fork.runId)
    assert snap.status == "failed"
    # Erasure: the source run goes, its fork with it, and both answer 404 afterwards
    assert raw(deployed.base_url, "DELETE", f"/runs/{project_id(run.runId)}", key=deployed.key).status == 204
    deadline = time.monotonic() + 120
    while raw(deployed.base_url, "GET", f"/runs/{project_id(fork.runId)}", key=deployed.key).status != 404:
        assert time.monotonic() < deadline, "the fork outlived its erased source"
        time.sleep(2)
    assert raw(deployed.base_url, "GET", f"/runs/{project_id(run.runId)}", key=deployed.key).status == 404
