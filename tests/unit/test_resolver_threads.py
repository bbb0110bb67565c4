"""Two requests resolved at once in one process (the local host's threads) each see their own request."""

from __future__ import annotations

import threading
from typing import Any

from functions._common.resolver import APIGatewayHttpResolver, Response


def _event(path: str, body: str) -> dict[str, Any]:
    return {
        "version": "2.0",
        "routeKey": f"POST {path}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {},
        "body": body,
        "isBase64Encoded": False,
        "requestContext": {"http": {"method": "POST", "path": path}, "stage": "$default"},
    }


def _meanwhile(
    held: tuple[Any, dict[str, Any], str],
    holding: threading.Event,
    other: tuple[Any, dict[str, Any], str],
    released: threading.Event,
) -> dict[str, Any]:
    """Resolve ``held`` (resolver, event, context) on a thread until its route signals ``holding``, then ``other``
    on this thread, then release the first: both answers, as "a" and "b"."""
    answers: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: answers.setdefault("a", held[0].resolve(held[1], held[2])))
    worker.start()
    assert holding.wait(10)
    answers["b"] = other[0].resolve(other[1], other[2])
    released.set()
    worker.join(10)
    return answers


def test_a_request_in_flight_keeps_its_own_event_while_another_is_resolved():
    # Given two resolvers (two functions), the first holding its route until the second has been resolved
    first, second = APIGatewayHttpResolver(), APIGatewayHttpResolver()
    entered, released = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    @first.post("/a")
    def a() -> Response[str]:
        entered.set()
        assert released.wait(10)
        seen["a"] = (first.current_event.path, first.current_event.body, first.lambda_context)
        return Response(200, "text/plain", "a")

    @second.post("/b")
    def b() -> Response[str]:
        seen["b"] = (second.current_event.path, second.current_event.body, second.lambda_context)
        return Response(200, "text/plain", "b")

    # When the second request is resolved meanwhile, in another thread
    answers = _meanwhile((first, _event("/a", "A"), "ctx-a"), entered, (second, _event("/b", "B"), "ctx-b"), released)
    # Then each route saw its own path, body and context, and both were routed
    assert seen == {"a": ("/a", "A", "ctx-a"), "b": ("/b", "B", "ctx-b")}
    assert (answers["a"]["statusCode"], answers["b"]["statusCode"]) == (200, 200)


def test_a_request_in_flight_keeps_its_path_arguments_while_another_on_the_same_resolver_ends():
    # Given one resolver (one function) whose first request is held after routing, before its handler is called
    app = APIGatewayHttpResolver()
    routed, released = threading.Event(), threading.Event()

    def hold(app_: Any, next_middleware: Any) -> Any:
        routed.set()
        assert released.wait(10)
        return next_middleware(app_)

    @app.post("/items/<item_id>", middlewares=[hold])
    def item(item_id: str) -> Response[str]:
        return Response(200, "text/plain", f"item {item_id}")

    @app.post("/other")
    def other() -> Response[str]:
        return Response(200, "text/plain", "other")

    # When a second request on the same resolver is resolved and ends meanwhile (its end clears the route context)
    answers = _meanwhile((app, _event("/items/7", ""), "ctx-a"), routed, (app, _event("/other", ""), "ctx-b"), released)
    # Then the first still reaches its handler with its own path argument
    assert (answers["b"]["statusCode"], answers["b"]["body"]) == (200, "other")
    assert (answers["a"]["statusCode"], answers["a"]["body"]) == (200, "item 7")
