"""POST /runs/{runId} verbs: ":fork" (replay | branch). API Gateway routes the whole segment here."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response

from functions._common import api
from functions._common.idempotency import idempotent
from functions._common.observability import count
from shared.protocol.models import ForkRunRequest
from shared.services import forks

app = api.build_resolver()


@app.post("/runs/<run_id>:fork")
def fork_run(run_id: str) -> Response[str]:
    caller = api.caller(app)
    key = api.idempotency_key(app)
    req = api.parse(app, ForkRunRequest)
    ports = api.ports()

    def once() -> tuple[int, dict]:
        created = forks.fork_run(ports, caller, run_id, req)
        return created.status, created.body

    status, body, replayed = idempotent(caller, f"forkRun#{run_id}", key, req.model_dump(mode="json"),
                                        app.lambda_context,
                                        ports.ids.ulid(), once)
    if not replayed and status < 300:
        count("Forks")
    return api.reply(status, body, {"OpenWOP-Idempotent-Replay": "true"} if replayed else None)


lambda_handler = api.make_handler(app)
