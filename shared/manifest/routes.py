"""The route table: the API Gateway (HTTP API) routes and the function each one invokes.

The CDK stack (``infra/``) deploys it and the local front (``shared/local/front.py``) serves it, so deployed and local
routing cannot drift. The documented operations' routes are derived from the operation table
(``shared.protocol.openapi.operations``: an operation names its function), in its order; the certification-stage
test surface and the catch-all, which the document leaves out, are listed here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from shared.protocol.openapi.operation import Op
from shared.protocol.openapi.operations import OPERATIONS


@dataclass(frozen=True)
class Route:
    """An API Gateway (HTTP API, payload v2) route. ``path`` uses ``{name}`` for one whole segment."""

    method: str
    path: str
    function: str
    auth: bool = True
    streaming: bool = False
    carries: tuple[str, ...] = ()
    """The operation paths this route serves when they are not just its own path: API Gateway route keys have no
    ``:``, so a ``:verb`` operation (``/runs/{runId}:fork``) rides the route of its resource."""

    @property
    def key(self) -> str:
        """The API Gateway route key: ``METHOD /path``, or ``$default`` for the catch-all."""
        return DEFAULT_ROUTE if self.path == DEFAULT_ROUTE else f"{self.method} {self.path}"

    @property
    def operations(self) -> tuple[str, ...]:
        """The operation paths (as the OpenAPI document names them) this route serves; none for ``$default``."""
        return () if self.path == DEFAULT_ROUTE else self.carries or (self.path,)


DEFAULT_ROUTE = "$default"
SEAMS_PATH = "/conformance/seams/"
# RFC 0158's durability test hook: a fixed path outside the seams profile's prefix, served with that profile only.
DURABILITY_PATH = "/host/durability/"


def routes_of(operations: Iterable[Op]) -> tuple[Route, ...]:
    """The routes carrying ``operations``, in the order of each route's first operation. The operations a route
    carries must agree on its function, auth and streaming."""
    carried: dict[tuple[str, str], list[Op]] = {}
    for op in operations:
        carried.setdefault((op.method, op.route), []).append(op)
    out: list[Route] = []
    for (method, path), ops in carried.items():
        first = ops[0]
        if any((op.function, op.auth, op.streaming) != (first.function, first.auth, first.streaming) for op in ops):
            raise ValueError(f"{method} {path}: its operations differ in function, auth or streaming")
        paths = tuple(op.path for op in ops)
        carries = () if paths == (path,) else paths
        out.append(Route(method, path, first.function, auth=first.auth, streaming=first.streaming, carries=carries))
    return tuple(out)


# The conformance seams profile (api/seams-v2.yaml): routed always, served only with OPENWOP_CONFORMANCE_SEAMS (CDK
# context conformanceSeams, off by default); without it every request is the 404 of a path never served.
TEST_SURFACE: tuple[Route, ...] = (
    Route("POST", f"{SEAMS_PATH}sample/event-log/seed", "conformance_seams"),
    Route("POST", f"{SEAMS_PATH}sample/effect-seams/fire", "conformance_seams"),
    Route("POST", f"{SEAMS_PATH}sample/mcp/invoke", "conformance_seams"),
    Route("GET", f"{DURABILITY_PATH}kill", "conformance_seams"),  # the hook's probe (fires nothing)
    Route("POST", f"{DURABILITY_PATH}kill", "conformance_seams"),
)

ROUTES: tuple[Route, ...] = (
    *routes_of(OPERATIONS),
    *TEST_SURFACE,
    # Anything no route matches still answers the protocol's 404 envelope (not API Gateway's own body).
    Route("ANY", DEFAULT_ROUTE, "not_found", auth=False),
)
