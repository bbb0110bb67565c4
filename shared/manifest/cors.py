"""The HTTP API's CORS configuration and the origins it grants (the local front answers the same)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cors:
    """The HTTP API's CORS configuration (API Gateway's ``CorsConfiguration``; the local front does the same).

    Preflights (``OPTIONS`` with ``Origin`` and ``Access-Control-Request-Method``) are answered by API Gateway
    itself, before any route; an actual request from a granted origin gets ``Access-Control-Allow-Origin`` and
    ``Access-Control-Expose-Headers`` added to its answer. headers.md §Cross-origin preflight: a granted origin must
    be admitted the operation's method and every request header the contract declares for it (``Authorization``
    listed by name: a ``*`` does not admit it); admitting the union on every operation conforms. No credentials
    mode: callers authenticate with a bearer key their script sets, never with a cookie."""

    allow_methods: tuple[str, ...] = ("GET", "POST", "PUT", "DELETE")
    allow_headers: tuple[str, ...] = (
        "Accept-Language",
        "Authorization",
        "Content-Type",
        "Idempotency-Key",
        "If-None-Match",
        "Last-Event-ID",
        "OpenWOP-Client-Version",
        "OpenWOP-Dedup",
        "OpenWOP-Force-Engine-Version",
        "OpenWOP-Version",
    )
    expose_headers: tuple[str, ...] = (
        "Allow",
        "ETag",
        "OpenWOP-Idempotent-Replay",
        "OpenWOP-Version",
        "Retry-After",
        "WWW-Authenticate",
    )
    max_age_s: int = 600


CORS = Cors()
CORS_ANY_ORIGIN = "*"


def cors_origins(raw: str | None) -> tuple[str, ...]:
    """The origins granted, from a setting (``OPENWOP_CORS_ORIGINS`` locally, CDK context ``corsOrigins``):
    unset is every origin (``*``: bearer keys only, no cookies, so no ambient credential crosses origins), a comma
    list is those origins exactly, and an empty value grants none (CORS off)."""
    if raw is None:
        return (CORS_ANY_ORIGIN,)
    return tuple(o.strip().rstrip("/") for o in raw.split(",") if o.strip())
