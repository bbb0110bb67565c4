"""GET /.well-known/openwop (no auth): the closed v2 discovery root, with ETag."""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.services import discovery

app = api.build_resolver()


@app.get("/.well-known/openwop")
def get_capabilities() -> Response[str]:
    doc = discovery.capabilities(api.discovery_ports())
    tag = discovery.etag_of(doc)
    if api.header(app, "if-none-match") == tag:
        return api.empty(304, {"ETag": tag})
    return api.reply(200, doc, {"ETag": tag, "Cache-Control": "max-age=60"})


lambda_handler = api.make_handler(app, authenticated=False)
