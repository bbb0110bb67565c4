"""GET /runs: the caller's runs, newest first, cursor-paginated."""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.services import common, runs

app = api.build_resolver()


@app.get("/runs")
def list_runs() -> Response[str]:
    caller = api.caller(app)
    params = api.query(app)
    common.run_list_filters(params)
    return api.reply(200, runs.list_runs(api.ports(), caller, params))


lambda_handler = api.make_handler(app)
