"""One operation of the served surface: its method and path, what the document says of it, and the function that
serves it (the route table is derived from these, ``shared.manifest.routes``). Plain data: standard library only, as
every API handler loads it with the route table."""

from __future__ import annotations

from dataclasses import dataclass, field

# The refusals of a read, and of a write (every operation also answers 400, 406 and 426; 401 when authenticated).
READ_ERRORS = (400, 401, 403, 404, 406)
WRITE_ERRORS = (400, 401, 403, 404, 406, 409, 413, 415, 422)


@dataclass(frozen=True)
class Op:
    """An operation: ``method`` and ``path`` as the document names them (``{name}`` for a path parameter, a ``:verb``
    suffix on the last segment), ``function`` the Lambda function serving it. ``success`` maps a status to its
    response schema's name (``None``: no body); ``errors`` the refusal statuses; ``body`` the request body's schema;
    ``query`` and ``headers`` name its parameters (``shared.protocol.openapi.parameters``)."""

    method: str
    path: str
    operation_id: str
    function: str
    success: dict[int, str | None]
    errors: tuple[int, ...]
    body: str | None = None
    query: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()
    media: str = "application/json"
    links: dict[str, str] = field(default_factory=dict)
    route_path: str = ""
    """The API Gateway route's path when it is not the operation's path up to its ``:verb``: route keys have no
    ``:``, so ``/runs/{runId}:fork`` rides ``POST /runs/{runId}``, and ``/runs:bulk-cancel`` (one whole segment with a
    verb, beside ``POST /runs``) rides ``POST /{collection}``."""
    auth: bool = True
    streaming: bool = False
    registration: bool = False
    """A registration: its ``400 validation_error`` always carries ``details.errors`` (issue 24 part 6)."""
    refusals: dict[int, str] = field(default_factory=dict)
    """An error status whose envelope says more than ``ErrorEnvelope``: the schema's name (e.g. 422 -> the gate's)."""
    description: str = ""
    """What the document says of the operation beyond its shape (e.g. where it is served)."""

    @property
    def route(self) -> str:
        """The path of the API Gateway route that carries this operation."""
        if self.route_path:
            return self.route_path
        head, _, last = self.path.rpartition("/")
        return f"{head}/{last.split(':')[0]}"
