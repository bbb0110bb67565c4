"""GET /runs/{runId}/events/poll: long-poll (afterSequence, timeout)."""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.services import runs

app = api.build_resolver()


@app.get("/runs/<run_id>/events/poll")
def poll_run_events(run_id: str) -> Response[str]:
    caller = api.caller(app)
    return api.reply(200, runs.poll_events(api.ports(), caller, run_id, api.query(app)))


lambda_handler = api.make_handler(app)
