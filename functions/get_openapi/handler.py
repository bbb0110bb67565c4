"""GET /openapi.json (no auth): the served OpenAPI document of the implemented surface.

It is the stored ``shared/services/openapi.json``, generated from the route table and the body models
(``shared.services.openapi``, ``make openapi``); reading it imports none of those models."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from functions._common import api
from functions._common.resolver import Response

app = api.build_resolver()


@lru_cache(maxsize=1)
def _document() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((resources.files("shared.services") / "openapi.json").read_text("utf-8"))
    return doc


@app.get("/openapi.json")
def get_openapi() -> Response[str]:
    return api.reply(200, _document())


lambda_handler = api.make_handler(app, authenticated=False)
