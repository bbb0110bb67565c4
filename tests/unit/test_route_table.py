"""The route table is derived from the operation table: a ``:verb`` operation rides its resource's route, and the
operations one route carries must agree on what serves them."""

from __future__ import annotations

import pytest

from shared.manifest.routes import Route, routes_of
from shared.protocol.openapi.operation import Op


def _op(method: str, path: str, function: str, **kw: object) -> Op:
    return Op(method, path, path.rsplit("/", 1)[-1], function, {200: None}, (), **kw)  # type: ignore[arg-type]


def test_routes_of_carries_verb_operations_on_their_resource_route() -> None:
    # Given a plain operation and two :verb operations on the same resource, and one on its own route
    ops = (
        _op("GET", "/things/{id}", "get_thing"),
        _op("POST", "/things/{id}:a", "thing_actions"),
        _op("POST", "/things/{id}:b", "thing_actions"),
        _op("POST", "/things:all", "bulk", route_path="/{collection}"),
    )
    # When the routes are derived, then each route carries its operations, in order
    assert routes_of(ops) == (
        Route("GET", "/things/{id}", "get_thing"),
        Route("POST", "/things/{id}", "thing_actions", carries=("/things/{id}:a", "/things/{id}:b")),
        Route("POST", "/{collection}", "bulk", carries=("/things:all",)),
    )


def test_routes_of_refuses_operations_of_one_route_served_differently() -> None:
    # Given two :verb operations on one route naming different functions
    ops = (_op("POST", "/things/{id}:a", "one"), _op("POST", "/things/{id}:b", "other"))
    # Then the route table cannot be derived
    with pytest.raises(ValueError, match="POST /things/{id}"):
        routes_of(ops)
