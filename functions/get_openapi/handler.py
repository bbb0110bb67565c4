"""GET /openapi.json (no auth): the served OpenAPI document of the implemented surface."""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.services import openapi

app = api.build_resolver()


@app.get("/openapi.json")
def get_openapi() -> Response[str]:
    return api.reply(200, openapi.document())


lambda_handler = api.make_handler(app)
