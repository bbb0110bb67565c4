"""An OTLP/HTTP span exporter in the protocol's JSON encoding, on the standard library.

The OpenTelemetry protobuf exporter pulls protobuf, the generated OTLP and Google API modules and requests: ~6 MB
of a 40 MB layer. OTLP/HTTP also carries JSON (``Content-Type: application/json``, the same messages, ids as hex
strings, 64-bit integers as decimal strings), which every OTLP receiver accepts (the OpenTelemetry and ADOT
collectors on 4318). One POST per exported batch, one attempt with a timeout: a failed export loses that batch and
never fails or slows a run beyond the timeout.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult


def _value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, list | tuple):
        return {"arrayValue": {"values": [_value(x) for x in v]}}
    return {"stringValue": str(v)}


def _attributes(attrs: Any) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in (attrs or {}).items()]


def _span(s: ReadableSpan) -> dict[str, Any]:
    ctx = s.get_span_context()
    assert ctx is not None
    out: dict[str, Any] = {
        "traceId": f"{ctx.trace_id:032x}",
        "spanId": f"{ctx.span_id:016x}",
        "name": s.name,
        "kind": s.kind.value + 1,  # the API's INTERNAL=0, SERVER, CLIENT...; OTLP's SPAN_KIND_INTERNAL=1, ...
        "startTimeUnixNano": str(s.start_time or 0),
        "endTimeUnixNano": str(s.end_time or 0),
        "attributes": _attributes(s.attributes),
        "status": {"code": s.status.status_code.value},
    }
    if s.parent is not None:
        out["parentSpanId"] = f"{s.parent.span_id:016x}"
    return out


def encode(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """An ``ExportTraceServiceRequest`` in OTLP/JSON: spans grouped by resource and instrumentation scope."""
    groups: dict[tuple[int, str], tuple[Any, str, list[dict[str, Any]]]] = {}
    for s in spans:
        scope = s.instrumentation_scope.name if s.instrumentation_scope is not None else ""
        key = (id(s.resource), scope)
        groups.setdefault(key, (s.resource, scope, []))[2].append(_span(s))
    by_resource: dict[int, dict[str, Any]] = {}
    for resource, scope, items in groups.values():
        entry = by_resource.setdefault(
            id(resource),
            {
                "resource": {"attributes": _attributes(resource.attributes if resource is not None else {})},
                "scopeSpans": [],
            },
        )
        entry["scopeSpans"].append({"scope": {"name": scope}, "spans": items})
    return {"resourceSpans": list(by_resource.values())}


class OtlpJsonSpanExporter(SpanExporter):
    """POSTs each batch to ``endpoint`` (an OTLP/HTTP traces URL, e.g. ``http://localhost:4318/v1/traces``)."""

    def __init__(self, endpoint: str, *, timeout_s: float = 5.0) -> None:
        self._endpoint = endpoint
        self._timeout_s = timeout_s

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not spans:
            return SpanExportResult.SUCCESS
        body = json.dumps(encode(spans), separators=(",", ":")).encode("utf-8")
        req = urllib.request.Request(
            self._endpoint, data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=self._timeout_s) as resp:  # noqa: S310 (the operator's endpoint)
                return SpanExportResult.SUCCESS if 200 <= resp.status < 300 else SpanExportResult.FAILURE
        except (OSError, ValueError):
            return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
