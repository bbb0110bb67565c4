"""GET /runs/{runId}/eval-summary: the EvalSummary of a terminal eval run (409 while running, 404 otherwise)."""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.services import summaries

app = api.build_resolver()


@app.get("/runs/<run_id>/eval-summary")
def get_eval_summary(run_id: str) -> Response[str]:
    caller = api.caller(app)
    return api.reply(200, summaries.eval_summary(api.ports(), caller, run_id))


lambda_handler = api.make_handler(app)
