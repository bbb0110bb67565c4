"""GET /runs: the caller's runs, newest first, cursor-paginated."""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.services import runs

app = api.build_resolver()


@app.get("/runs")
def list_runs() -> Response[str]:
    caller = api.caller(app)
    return api.reply(200, runs.list_runs(api.ports(), caller, api.query(app)))


lambda_handler = api.make_handler(app)
