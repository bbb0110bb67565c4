"""GET /host/openwop-serverless/runs/{runId}/eval-report: per-task diagnostics of a terminal eval run.
GET /host/openwop-serverless/runs/{runId}/trials?status=waiting: an eval run's trials waiting for their driver.
GET /host/openwop-serverless/eval-runs: the tenant's eval runs, newest first (suite, agent, name, status filters).

Query: limit (tasks per page, 1..1000, default 200), cursor (the nextCursor of the previous page)."""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.services import eval_report, eval_runs, eval_trials

app = api.build_resolver()


@app.get("/host/openwop-serverless/runs/<run_id>/eval-report")
def get_eval_report(run_id: str) -> Response[str]:
    caller = api.caller(app)
    return api.reply(200, eval_report.eval_report(api.ports(), caller, run_id, api.query(app)))


@app.get("/host/openwop-serverless/runs/<run_id>/trials")
def list_waiting_trials(run_id: str) -> Response[str]:
    caller = api.caller(app)
    params = api.query(app)
    return api.reply(200, eval_trials.waiting_trials(api.ports(), caller, run_id, params, api.origin(app)))


@app.get("/host/openwop-serverless/eval-runs")
def list_eval_runs() -> Response[str]:
    return api.reply(200, eval_runs.list_eval_runs(api.ports(), api.caller(app), api.query(app)))


lambda_handler = api.make_handler(app)
