"""GET /host/openwop-serverless/ui (no auth): the viewer page (static; it calls the API with a pasted key).
``.../ui/`` (trailing slash) is served by the ``$default`` function: a route path cannot end with ``/``."""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.services import viewer

app = api.build_resolver()


@app.get("/host/openwop-serverless/ui")
def get_ui() -> Response[str]:
    html, headers = viewer.page()
    return Response(
        status_code=200,
        content_type="text/html; charset=utf-8",
        body=html,
        headers={"OpenWOP-Version": api.VERSION, **headers},
    )


lambda_handler = api.make_handler(app, authenticated=False)
