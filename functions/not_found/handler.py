"""API Gateway's ``$default`` route: a path no route matches answers the protocol's ``404 not_found`` envelope.

One exception: ``GET /host/openwop-serverless/ui/`` (the viewer page with its trailing slash, which no API Gateway
route path may end with) answers the page, the same bytes as ``functions/get_ui``."""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response

app = api.build_resolver()  # every other request reaches the resolver's not-found handler


@app.get("/host/openwop-serverless/ui/")
def viewer_page() -> Response[str]:
    from shared.services import viewer  # only this path pays for it

    html, headers = viewer.page()
    return Response(
        status_code=200,
        content_type="text/html; charset=utf-8",
        body=html,
        headers={"OpenWOP-Version": api.VERSION, **headers},
    )


lambda_handler = api.make_handler(app, authenticated=False)
