"""The agent gateway behind a Lambda function URL (decision 0143, "On AWS"): the URL's payload-v2 event has no
``pathParameters``, so the handler reads the gateway id and the path under ``G`` from ``rawPath``; the HTTP API
route's event still works. No AWS here; tests/integration/test_gateway_function_url.py serves such events."""

from __future__ import annotations

from typing import Any

from functions.agent_gateway import handler as app
from shared.services.agent_sessions import GATEWAY_PREFIX


def url_event(raw_path: str, body: str = "{}", method: str = "POST") -> dict[str, Any]:
    """A function URL's event as Lambda sends it: payload 2.0, ``$default`` route, no ``pathParameters``."""
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": raw_path,
        "rawQueryString": "a=1",
        "headers": {"content-type": "application/json", "host": "abc.lambda-url.eu-west-1.on.aws"},
        "requestContext": {
            "domainName": "abc.lambda-url.eu-west-1.on.aws",
            "http": {"method": method, "path": raw_path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"},
            "requestId": "req-1",
            "routeKey": "$default",
            "stage": "$default",
        },
        "body": body,
        "isBase64Encoded": False,
    }


def test_a_function_url_event_names_the_gateway_and_the_path_under_it() -> None:
    # Given a function URL's event for a trial's model gateway (no pathParameters)
    event = url_event(f"{GATEWAY_PREFIX}r-1.t0.2/v1/chat/completions", body='{"model": "m"}')
    # When the handler reads it
    gateway_id, request = app._request(event)
    # Then it names the gateway and the path under G, as the HTTP API route's parameters would
    assert gateway_id == "r-1.t0.2"
    assert (request.method, request.path, request.body, request.query) == (
        "POST",
        "/v1/chat/completions",
        b'{"model": "m"}',
        "a=1",
    )
    # and a percent-encoded segment is decoded as API Gateway decodes path parameters
    assert app._request(url_event(f"{GATEWAY_PREFIX}r%2D1/complete"))[0] == "r-1"
    # and the route's event (pathParameters) reads the same
    routed = {**event, "pathParameters": {"gatewayId": "r-1.t0.2", "rest": "v1/chat/completions"}, "rawPath": "/x"}
    assert app._request(routed)[0] == gateway_id and app._request(routed)[1].path == request.path
    # and the prefix is the one the session's URLs are built with
    assert app.GATEWAY_PREFIX == GATEWAY_PREFIX
