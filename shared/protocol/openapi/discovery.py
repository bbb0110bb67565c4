"""The discovery operations: the capabilities document, the OpenAPI document, the viewer page, the effect-seam
manifest."""

from __future__ import annotations

from shared.protocol.openapi.operation import Op

DISCOVERY: tuple[Op, ...] = (
    Op(
        "GET",
        "/.well-known/openwop",
        "getCapabilities",
        "get_capabilities",
        {200: "Capabilities", 304: None},
        (406,),
        headers=("If-None-Match",),
        auth=False,
    ),
    Op("GET", "/openapi.json", "getOpenApi", "get_openapi", {200: "Object"}, (406,), auth=False),
)

# The viewer page (static; it calls the API with a key the user pastes): no auth on the page itself. A route path
# cannot end with "/", so ".../ui/" reaches $default, whose function serves the same page.
VIEWER: tuple[Op, ...] = (
    Op(
        "GET",
        "/host/openwop-serverless/ui",
        "getViewer",
        "get_ui",
        {200: "Html"},
        (406,),
        media="text/html",
        auth=False,
    ),
)

EFFECT_SEAMS: tuple[Op, ...] = (
    Op("GET", "/host/effect-seams", "getEffectSeamManifest", "get_effect_seams", {200: "Object"}, (401, 406)),
)
