"""Webhooks (spec paths, webhooks.md): register, list, unregister, rotate a Standard Webhooks secret, dead letters.

POST /webhooks (201; an opted-in registration is verified against its endpoint first; ``Idempotency-Key`` as on
POST /runs); GET /webhooks (200, the caller's subscriptions, never a secret);
DELETE /webhooks/{webhookId} (204); POST /webhooks/{webhookId}/rotate-secret (200);
GET /webhooks/{webhookId}/dead-letters (200, newest first).
"""

from __future__ import annotations

from functions._common import api
from functions._common.idempotency import idempotent
from functions._common.resolver import Response
from shared.services import webhook_secrets, webhooks

app = api.build_resolver()


@app.post("/webhooks")
def register() -> Response[str]:
    from shared.protocol.webhook_bodies import RegisterWebhook

    caller = api.caller(app)
    key = api.idempotency_key(app)
    body = api.parse(app, RegisterWebhook)
    ports = api.ports()
    # the record keeps a generated secret sealed (webhook_secrets.seal_answer), never in the clear
    status, out, replayed = idempotent(
        caller,
        "registerWebhook",
        key,
        body.model_dump(mode="json"),
        app.lambda_context,
        ports.ids.ulid(),
        lambda: (201, webhook_secrets.seal_answer(ports, webhooks.register(ports, caller, body))),
    )
    out = webhook_secrets.open_answer(ports, out) if status == 201 else out
    return api.reply(status, out, {"OpenWOP-Idempotent-Replay": "true"} if replayed else None)


@app.get("/webhooks")
def list_webhooks() -> Response[str]:
    caller = api.caller(app)
    return api.reply(200, webhooks.list_webhooks(api.ports(), caller, api.query(app)))


@app.delete("/webhooks/<webhook_id>")
def unregister(webhook_id: str) -> Response[str]:
    webhooks.unregister(api.ports(), api.caller(app), api.segment(webhook_id))
    return api.empty(204)


@app.post("/webhooks/<webhook_id>/rotate-secret")
def rotate_secret(webhook_id: str) -> Response[str]:
    from shared.protocol.webhook_bodies import RotateWebhookSecret

    caller = api.caller(app)
    body = api.parse(app, RotateWebhookSecret)
    return api.reply(200, webhooks.rotate_secret(api.ports(), caller, api.segment(webhook_id), body))


@app.get("/webhooks/<webhook_id>/dead-letters")
def dead_letters(webhook_id: str) -> Response[str]:
    caller = api.caller(app)
    return api.reply(200, webhooks.dead_letters(api.ports(), caller, api.segment(webhook_id), api.query(app)))


lambda_handler = api.make_handler(app)
