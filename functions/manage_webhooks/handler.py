"""Webhooks (spec paths, webhooks.md): register, unregister, rotate a Standard Webhooks secret, read dead letters.

POST /webhooks (201; an opted-in registration is verified against its endpoint first);
DELETE /webhooks/{webhookId} (204); POST /webhooks/{webhookId}/rotate-secret (200);
GET /webhooks/{webhookId}/dead-letters (200, newest first).
"""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.services import webhooks

app = api.build_resolver()


@app.post("/webhooks")
def register() -> Response[str]:
    from shared.protocol.webhook_bodies import RegisterWebhook

    caller = api.caller(app)
    return api.reply(201, webhooks.register(api.ports(), caller, api.parse(app, RegisterWebhook)))


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
