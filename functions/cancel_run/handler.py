"""POST /runs/{runId}/cancel: stop the execution at once and end the run cancelled; POST /runs:bulk-cancel."""

from __future__ import annotations

from functions._common import api
from functions._common.idempotency import idempotent
from functions._common.resolver import Response
from shared.protocol.models import BulkCancelRunsRequest, CancelRunRequest, dump
from shared.services import lifecycle, runs

app = api.build_resolver()


@app.post("/runs/<run_id>/cancel")
def cancel_run(run_id: str) -> Response[str]:
    caller = api.caller(app)
    key = api.idempotency_key(app)
    req = api.parse_run_body(app, CancelRunRequest)
    ports = api.ports()
    status, body, replayed = idempotent(
        caller,
        f"cancelRun#{run_id}",
        key,
        dump(req),
        app.lambda_context,
        ports.ids.ulid(),
        lambda: (200, runs.cancel_run(ports, caller, run_id)),
    )
    return api.reply(status, body, {"OpenWOP-Idempotent-Replay": "true"} if replayed else None)


@app.post("/runs:bulk-cancel")
def bulk_cancel() -> Response[str]:
    caller = api.caller(app)
    key = api.idempotency_key(app)
    req = api.parse_run_body(app, BulkCancelRunsRequest, lifecycle.refuse_over_cap)
    ports = api.ports()
    status, body, replayed = idempotent(
        caller,
        "bulkCancelRuns",
        key,
        dump(req),
        app.lambda_context,
        ports.ids.ulid(),
        lambda: (200, lifecycle.bulk_cancel(ports, caller, req.runIds)),
    )
    return api.reply(status, body, {"OpenWOP-Idempotent-Replay": "true"} if replayed else None)


lambda_handler = api.make_handler(app)
