"""Powertools' HTTP API resolver, without the cold-start cost of the rest of its ``event_handler`` package.

``aws_lambda_powertools.event_handler``'s ``__init__`` imports every resolver Powertools ships (AppSync with
asyncio, Bedrock agents, VPC Lattice, Lambda function URLs, ...): about 80 ms of every cold start, for functions
that use one resolver. Importing this module registers that package *lazily* before anything imports it: its
submodules import as usual (``event_handler.api_gateway`` is the one we load), and the first use of any other
name the package defines runs the real package body, so code that asks for, say, ``event_handler.AppSyncResolver``
still gets it. Nothing else changes: the classes are Powertools' own.

Import ``Response`` and ``APIGatewayHttpResolver`` from here, never from the package.

Powertools keeps the request being resolved in *class* attributes (``BaseRouter.current_event`` and
``lambda_context``): one slot for every resolver of the process. Lambda runs one request per instance at a time, but
the local host runs each function's handler in many threads at once, where one request would read another's
headers or body. The resolver here keeps both per thread (and so per request); in Lambda nothing changes.
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
from collections.abc import Mapping  # noqa: E402

from aws_lambda_powertools.event_handler.api_gateway import (  # noqa: E402
    APIGatewayHttpResolver as _PowertoolsHttpResolver,
)
from aws_lambda_powertools.event_handler.api_gateway import Response  # noqa: E402


class APIGatewayHttpResolver(_PowertoolsHttpResolver):
    """Powertools' HTTP API resolver with the current event and Lambda context kept per thread."""

    _request = threading.local()

    @property  # type: ignore[override]
    def current_event(self) -> Any:
        return self._request.event

    @current_event.setter
    def current_event(self, value: Any) -> None:
        self._request.event = value

    @property  # type: ignore[override]
    def lambda_context(self) -> Any:
        return self._request.context

    @lambda_context.setter
    def lambda_context(self, value: Any) -> None:
        self._request.context = value

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        self._request.event = self._to_proxy_event(dict(event))
        self._request.context = context
        return super().resolve(event, context)


__all__ = ["APIGatewayHttpResolver", "Response"]
