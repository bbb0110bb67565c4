"""The viewer page: one static HTML document with its CSS and JS inlined, and a strict Content-Security-Policy.

The inline ``<style>`` and ``<script>`` are allowed by their SHA-256 hashes only (no ``'unsafe-inline'``, no
``eval``), the page may fetch only its own origin (the API it is served by), and nothing may frame it. Built once
per process from the package data in ``shared/ui/``. Served at ``/host/openwop-serverless/ui`` (its route) and
``/host/openwop-serverless/ui/`` (API Gateway route paths cannot end with ``/``, so that path reaches the
``$default`` function, which serves the same bytes).
"""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache
from importlib import resources


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


@lru_cache(maxsize=1)
def page() -> tuple[str, dict[str, str]]:
    """(html, headers) of the viewer page."""
    ui = resources.files("shared.ui")
    html = ui.joinpath("viewer.html").read_text("utf-8")
    css = ui.joinpath("viewer.css").read_text("utf-8")
    js = ui.joinpath("viewer.js").read_text("utf-8")
    html = html.replace("/*STYLE*/", css).replace("/*SCRIPT*/", js)
    csp = "; ".join(
        (
            "default-src 'none'",
            f"script-src {_hash(js)}",
            f"style-src {_hash(css)}",
            "connect-src 'self'",
            "img-src 'self' data:",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        )
    )
    headers = {
        "Content-Security-Policy": csp,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-cache",
    }
    return html, headers


UI_PATHS = ("/host/openwop-serverless/ui", "/host/openwop-serverless/ui/")
