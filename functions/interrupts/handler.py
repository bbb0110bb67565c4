"""Interrupts: POST /runs/{runId}/interrupts/{nodeId}; GET and POST /interrupts/{token} (the token is the
credential); POST /host/openwop-serverless/runs/{runId}/interrupts/{nodeId}/token mints one."""

from __future__ import annotations

from collections.abc import Callable

from functions._common import api
from functions._common.idempotency import idempotent
from functions._common.resolver import Response
from shared.services import interrupts
from shared.services.common import Caller

app = api.build_resolver()


def _once(caller: Caller, operation: str, body: dict, fn: Callable[[], dict]) -> Response[str]:
    key, ports = api.idempotency_key(app), api.ports()
    status, out, replayed = idempotent(
        caller, operation, key, body, app.lambda_context, ports.ids.ulid(), lambda: (200, fn())
    )
    return api.reply(status, out, {"OpenWOP-Idempotent-Replay": "true"} if replayed else None)


@app.post("/runs/<run_id>/interrupts/<node_id>")
def resolve_by_run(run_id: str, node_id: str) -> Response[str]:
    from shared.protocol.models import ResolveInterruptRequest, dump

    caller, req = api.caller(app), api.parse_run_body(app, ResolveInterruptRequest)
    return _once(
        caller,
        f"resolveInterrupt#{run_id}#{node_id}",
        dump(req),
        lambda: interrupts.resolve_by_run(api.ports(), caller, run_id, node_id, req.resumeValue),
    )


@app.get("/interrupts/<token>")
def inspect_by_token(token: str) -> Response[str]:
    return api.reply(200, interrupts.inspect_by_token(api.ports(), token))


@app.post("/interrupts/<token>")
def resolve_by_token(token: str) -> Response[str]:
    from shared.protocol.models import ResolveInterruptRequest, dump

    req = api.parse_run_body(app, ResolveInterruptRequest)
    body = interrupts.read_token(api.ports(), token)  # the token is the credential: its run's tenant scopes the key
    return _once(
        Caller(str(body["r"]).split("/", 1)[0], f"token:{body['s']}"),
        f"resolveInterruptByToken#{token}",
        dump(req),
        lambda: interrupts.resolve_by_token(api.ports(), token, req.resumeValue),
    )


@app.post("/host/openwop-serverless/runs/<run_id>/interrupts/<node_id>/token")
def mint_token(run_id: str, node_id: str) -> Response[str]:
    caller = api.caller(app)
    return api.reply(201, interrupts.mint_token(api.ports(), caller, run_id, node_id))


lambda_handler = api.make_handler(app)
