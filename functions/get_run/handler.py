"""GET /runs/{runId} (RunSnapshot, ETag), the GET verbs on a run (":diff") and its effect ledger (/effects)."""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.errors import NotFoundError
from shared.services import runs
from shared.services.common import etag

app = api.build_resolver()


@app.get("/runs/<run_id>:diff")
def diff_run(run_id: str) -> Response[str]:
    from shared.services import forks

    caller = api.caller(app)
    return api.reply(200, forks.diff(api.ports(), caller, run_id, api.query(app).get("against")))


@app.get("/runs/<run_id>/effects")
def get_run_effects(run_id: str) -> Response[str]:
    from shared.services import effects

    caller = api.caller(app)
    return api.reply(200, effects.run_effects(api.ports(), caller, run_id))


@app.get("/runs/<run_id>")
def get_run(run_id: str) -> Response[str]:
    caller = api.caller(app)
    if ":" in run_id:  # an unknown ":verb" never reaches the plain resource
        raise NotFoundError("No such resource.")
    ports = api.ports()
    rec = runs.get_run(ports, caller, run_id)
    tag = etag(rec)
    if api.header(app, "if-none-match") == tag:
        return api.empty(304, {"ETag": tag})
    return api.reply(200, runs.run_snapshot(ports, rec), {"ETag": tag})


lambda_handler = api.make_handler(app)
