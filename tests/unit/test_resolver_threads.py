"""Two requests resolved at once in one process (the local host's threads) each see their own request."""

from __future__ import annotations

import threading
from typing import Any

from functions._common.resolver import APIGatewayHttpResolver, Response


def _event(path: str, body: str) -> dict[str, Any]:
    return {"version": "2.0", "routeKey": f"POST {path}", "rawPath": path, "rawQueryString": "", "headers": {},
            "body": body, "isBase64Encoded": False,
            "requestContext": {"http": {"method": "POST", "path": path}, "stage": "$default"}}


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

    answers: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: answers.setdefault("a", first.resolve(_event("/a", "A"), "ctx-a")))
    worker.start()
    assert entered.wait(10)
    # When the second request is resolved meanwhile, in another thread
    answers["b"] = second.resolve(_event("/b", "B"), "ctx-b")
    released.set()
    worker.join(10)
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

    answers: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: answers.setdefault("a", app.resolve(_event("/items/7", ""), "ctx-a")))
    worker.start()
    assert routed.wait(10)
    # When a second request on the same resolver is resolved and ends meanwhile (its end clears the route context)
    answers["b"] = app.resolve(_event("/other", ""), "ctx-b")
    released.set()
    worker.join(10)
    # Then the first still reaches its handler with its own path argument
    assert (answers["b"]["statusCode"], answers["b"]["body"]) == (200, "other")
    assert (answers["a"]["statusCode"], answers["a"]["body"]) == (200, "item 7")
