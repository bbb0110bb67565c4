"""Tracing: spans of runs, nodes, model and tool calls; ``NoTracing`` when it is off."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Protocol

AttrValue = str | bool | int | float | Sequence[str]


class Span(Protocol):
    """One open span: attributes may be added (and the name changed) until it ends."""

    def set(self, key: str, value: AttrValue) -> None: ...
    def rename(self, name: str) -> None: ...
    def fail(self, error_type: str) -> None:
        """Mark the span failed with ``error.type`` (a spec error code or a class name; never a message)."""
        ...


class Tracing(Protocol):
    """Spans of runs, nodes, model and tool calls (OpenTelemetry where it is on: ``shared/telemetry/otel.py``).

    ``span`` opens a span under the current one, or under ``parent`` (a W3C ``traceparent``: the trace context a run
    stored when it was created, so every task of the run joins one trace). ``current`` is the open span's
    ``traceparent`` (None when tracing is off). ``capture_content`` (an operator's opt-in) allows prompt, message
    and tool-argument text in attributes; without it no span carries any. ``flush`` exports what has ended (the
    end of a Lambda invocation)."""

    capture_content: bool

    def span(
        self,
        name: str,
        attributes: Mapping[str, AttrValue] | None = None,
        *,
        parent: str | None = None,
        kind: str = "internal",
    ) -> AbstractContextManager[Span]: ...
    def current(self) -> str | None: ...
    def flush(self) -> None: ...


class _NoSpan:
    def set(self, key: str, value: AttrValue) -> None:
        pass

    def rename(self, name: str) -> None:
        pass

    def fail(self, error_type: str) -> None:
        pass


_NO_SPAN = _NoSpan()


class NoTracing:
    """Tracing off (the default): no span, no trace context, nothing imported."""

    capture_content = False

    def span(
        self,
        name: str,
        attributes: Mapping[str, AttrValue] | None = None,
        *,
        parent: str | None = None,
        kind: str = "internal",
    ) -> AbstractContextManager[Span]:
        return nullcontext(_NO_SPAN)

    def current(self) -> str | None:
        return None

    def flush(self) -> None:
        pass
