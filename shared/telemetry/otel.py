"""The Tracing port on OpenTelemetry: spans exported over OTLP/HTTP (JSON, ``otlp_json``) to the endpoint in settings.

Built by ``shared.wiring.build_tracing`` only when ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set, so no handler
imports OpenTelemetry otherwise. One ``TracerProvider`` per process (not the global one), a batch processor that
``flush`` drains at the end of each invocation (a frozen Lambda sends nothing). A span records no exception text:
a failure is ``error.type`` (a spec code or an exception's class name) and an error status without a description,
so no message, address or credential reaches a trace.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from shared.ports import AttrValue, Span

FLUSH_TIMEOUT_MS = 5000
EXPORT_TIMEOUT_S = 5.0


class _OtelSpan:
    __slots__ = ("_span",)

    def __init__(self, span: Any) -> None:
        self._span = span

    def set(self, key: str, value: AttrValue) -> None:
        self._span.set_attribute(key, value)

    def rename(self, name: str) -> None:
        self._span.update_name(name)

    def fail(self, error_type: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        self._span.set_attribute("error.type", error_type)
        self._span.set_status(Status(StatusCode.ERROR))


class OtelTracing:
    """The ``Tracing`` port: spans from one SDK ``TracerProvider`` to ``exporter``."""

    def __init__(self, exporter: Any, *, service_name: str, capture_content: bool = False, batch: bool = True) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

        self._provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        self._provider.add_span_processor(BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter))
        self._tracer = self._provider.get_tracer("openwop-serverless")
        self.capture_content = capture_content

    @classmethod
    def otlp(cls, endpoint: str, *, service_name: str, capture_content: bool = False) -> OtelTracing:
        """Spans to an OTLP/HTTP traces endpoint (``http://localhost:4318/v1/traces`` for a collector beside the
        function, such as the ADOT Lambda layer's, which forwards to X-Ray)."""
        from shared.telemetry.otlp_json import OtlpJsonSpanExporter

        return cls(
            OtlpJsonSpanExporter(endpoint, timeout_s=EXPORT_TIMEOUT_S),
            service_name=service_name,
            capture_content=capture_content,
        )

    @contextmanager
    def span(
        self,
        name: str,
        attributes: Mapping[str, AttrValue] | None = None,
        *,
        parent: str | None = None,
        kind: str = "internal",
    ) -> Iterator[Span]:
        from opentelemetry.trace import SpanKind, Status, StatusCode

        context = None
        if parent:
            from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

            context = TraceContextTextMapPropagator().extract({"traceparent": parent})
        span_kind = SpanKind.CLIENT if kind == "client" else SpanKind.INTERNAL
        with self._tracer.start_as_current_span(
            name,
            context=context,
            kind=span_kind,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as sp:
            try:
                yield _OtelSpan(sp)
            except BaseException as exc:
                if "error.type" not in (getattr(sp, "attributes", None) or {}):
                    sp.set_attribute("error.type", type(exc).__name__)
                sp.set_status(Status(StatusCode.ERROR))
                raise

    def current(self) -> str | None:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(carrier)
        return carrier.get("traceparent")

    def flush(self) -> None:
        self._provider.force_flush(FLUSH_TIMEOUT_MS)

    def shutdown(self) -> None:
        self._provider.shutdown()
