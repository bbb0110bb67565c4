"""POST /runs: a workflow run, or with mode "eval" an eval run."""

from __future__ import annotations

from functions._common import api
from functions._common.idempotency import idempotent
from functions._common.observability import count
from functions._common.resolver import Response
from shared.protocol.models import CreateRunRequest, dump
from shared.services import runs

app = api.build_resolver()


@app.post("/runs")
def create_run() -> Response[str]:
    caller = api.caller(app)
    key = api.idempotency_key(app)
    req = api.parse_run_body(app, CreateRunRequest)
    ports = api.ports()
    dedup = (api.header(app, "openwop-dedup") or "").strip().lower() == "enforce"

    def once() -> tuple[int, dict]:
        created = runs.create(ports, caller, req, dedup=dedup)
        return created.status, created.body

    status, body, replayed = idempotent(caller, "createRun", key, dump(req), app.lambda_context, ports.ids.ulid(), once)
    if not replayed and status < 300:
        count("RunsStarted")
        if req.mode == "eval":
            count("EvalsStarted")
    return api.reply(status, body, {"OpenWOP-Idempotent-Replay": "true"} if replayed else None)


lambda_handler = api.make_handler(app)
