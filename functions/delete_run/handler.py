"""DELETE /runs/{runId} (host extension): erase a run and every copy derived from it. Idempotent."""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.services import erasure

app = api.build_resolver()


@app.delete("/runs/<run_id>")
def delete_run(run_id: str) -> Response[str]:
    caller = api.caller(app)
    erasure.erase_run(api.ports(), caller, run_id)
    return api.empty(204)


lambda_handler = api.make_handler(app)
