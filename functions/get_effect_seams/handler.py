"""GET /host/effect-seams: one row per outbound effect path the node runtime can reach."""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.services import discovery

app = api.build_resolver()


@app.get("/host/effect-seams")
def get_effect_seams() -> Response[str]:
    api.caller(app)
    return api.reply(200, discovery.effect_seams(api.ports()))


lambda_handler = api.make_handler(app)
