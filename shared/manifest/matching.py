"""Route matching: which methods a raw request path is served with (a ``405``'s ``Allow``), and which paths belong
to the certification-stage test surface."""

from __future__ import annotations

from functools import lru_cache

from shared.manifest.routes import DURABILITY_PATH, ROUTES, SEAMS_PATH, Route


def _segment_rank(pattern: str, segment: str) -> int:
    """How specifically an operation path's segment matches a raw request segment: 0 not at all, then ``{x}``
    (1), ``{x}:verb`` (2), a literal (3)."""
    if pattern.startswith("{"):
        name_end = pattern.find("}")
        suffix = pattern[name_end + 1 :]
        if not suffix:
            return 1 if segment else 0
        return 2 if segment.endswith(suffix) and len(segment) > len(suffix) else 0
    return 3 if pattern == segment else 0


def is_seam_path(path: str) -> bool:
    """A path of the certification-stage test surface (the seams profile and the durability hook): served only with
    ``OPENWOP_CONFORMANCE_SEAMS``, left out of the served OpenAPI document."""
    return path.startswith((SEAMS_PATH, DURABILITY_PATH))


def allowed_methods(raw_path: str, routes: tuple[Route, ...] | None = None) -> tuple[str, ...] | None:
    """The methods the operations at ``raw_path`` (still percent-encoded) are served with, sorted, or ``None``
    when no operation has that path (a ``404``, not a ``405``). The most specific operation path wins:
    ``/runs/x:diff`` is ``/runs/{runId}:diff`` (``GET``), not ``/runs/{runId}`` (``GET``, ``DELETE``)."""
    segments = raw_path.split("/")[1:] if raw_path.startswith("/") else raw_path.split("/")
    best: tuple[int, ...] = ()
    methods: set[str] = set()
    for method, patterns in _operation_patterns(ROUTES if routes is None else routes).get(len(segments), ()):
        rank = tuple(_segment_rank(p, s) for p, s in zip(patterns, segments, strict=True))
        if 0 in rank or rank < best:
            continue
        if rank > best:
            best, methods = rank, set()
        methods.add(method)
    return tuple(sorted(methods)) if methods else None


@lru_cache(maxsize=4)
def _operation_patterns(routes: tuple[Route, ...]) -> dict[int, list[tuple[str, tuple[str, ...]]]]:
    """(method, path segments) of every operation of ``routes``, by segment count (computed once per table)."""
    out: dict[int, list[tuple[str, tuple[str, ...]]]] = {}
    for route in routes:
        for path in route.operations:
            patterns = tuple(path.split("/")[1:])
            out.setdefault(len(patterns), []).append((route.method.upper(), patterns))
    return out
