"""Powertools' HTTP API resolver, without the cold-start cost of the rest of its ``event_handler`` package.

``aws_lambda_powertools.event_handler``'s ``__init__`` imports every resolver Powertools ships (AppSync with
asyncio, Bedrock agents, VPC Lattice, Lambda function URLs, ...): about 80 ms of every cold start, for functions
that use one resolver. Importing this module registers that package *lazily* before anything imports it: its
submodules import as usual (``event_handler.api_gateway`` is the one we load), and the first use of any other
name the package defines runs the real package body, so code that asks for, say, ``event_handler.AppSyncResolver``
still gets it. Nothing else changes: the classes are Powertools' own.

Import ``Response`` and ``APIGatewayHttpResolver`` from here, never from the package.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any

_PACKAGE = "aws_lambda_powertools.event_handler"


def _lazy_package() -> None:
    if _PACKAGE in sys.modules:
        return
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or spec.loader is None:  # pragma: no cover - Powertools is a dependency
        raise ImportError(_PACKAGE)
    package = importlib.util.module_from_spec(spec)
    loaded = False

    def __getattr__(name: str) -> Any:
        nonlocal loaded
        if name.startswith("__"):
            raise AttributeError(name)
        if importlib.util.find_spec(f"{_PACKAGE}.{name}") is not None:  # a submodule: only it
            return importlib.import_module(f"{_PACKAGE}.{name}")
        if not loaded:  # any other name: the package's own body, once
            loaded = True
            assert spec.loader is not None
            spec.loader.exec_module(package)
            if name in package.__dict__:
                return package.__dict__[name]
        raise AttributeError(f"module {_PACKAGE!r} has no attribute {name!r}")

    package.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules[_PACKAGE] = package
    parent: ModuleType = sys.modules["aws_lambda_powertools"]
    parent.__dict__["event_handler"] = package  # what "import a.b" sets on a


_lazy_package()

import threading  # noqa: E402

from aws_lambda_powertools.event_handler.api_gateway import (  # noqa: E402
    APIGatewayHttpResolver as _PowertoolsHttpResolver,
)
from aws_lambda_powertools.event_handler.api_gateway import Response  # noqa: E402


class APIGatewayHttpResolver(_PowertoolsHttpResolver):
    """Powertools' resolver, with the request it resolves kept per thread.

    Powertools keeps the current request on a class (``BaseRouter.current_event`` and ``lambda_context``), shared by
    every resolver in the process, and the route it matched with its path arguments on the resolver (``context``:
    ``_route``, ``_route_args``, cleared after each request). A Lambda container serves one request at a time, so that
    is safe deployed; the local host calls the handlers from one thread per connection, where a request could route,
    read its body or its credential from another request in flight (schemathesis with two workers saw a POST answered
    as unrouted), or lose its path arguments to another request's clearing (a 500: the route called without them).
    """

    _request = threading.local()

    @property
    def context(self) -> dict[str, Any]:  # type: ignore[override]
        mine: dict[str, Any] | None = getattr(self._request, "context_dict", None)
        if mine is None:
            mine = self._request.context_dict = {}
        return mine

    @context.setter
    def context(self, value: dict[str, Any]) -> None:
        self._request.context_dict = value

    @property
    def current_event(self) -> Any:  # type: ignore[override]
        return self._request.event

    @property
    def lambda_context(self) -> Any:  # type: ignore[override]
        return self._request.context

    def resolve(self, event: Any, context: Any) -> dict[str, Any]:
        self._request.context = context
        return super().resolve(event, context)

    def _to_proxy_event(self, event: dict[str, Any]) -> Any:
        proxy = super()._to_proxy_event(event)
        self._request.event = proxy  # what Powertools then reads as self.current_event, in this thread only
        return proxy


__all__ = ["APIGatewayHttpResolver", "Response"]
