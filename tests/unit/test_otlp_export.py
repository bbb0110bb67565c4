"""The Tracing port's wiring and its OTLP/HTTP JSON export, against a loopback OTLP receiver: off by default (no
OpenTelemetry imported), on with an endpoint; the posted body is an OTLP/JSON ExportTraceServiceRequest; a span
records no exception text; a receiver that is down loses the batch, never the caller's work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


class Receiver:
    """A loopback OTLP/HTTP traces endpoint that keeps what it is sent."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, str, dict[str, Any]]] = []
        posts = self.posts

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                posts.append((self.path, self.headers["Content-Type"], json.loads(body)))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


def _attrs(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: a["value"] for a in span["attributes"]}


def _probe(env: dict[str, str]) -> dict[str, Any]:
    code = (
        "import json, sys\n"
        "from shared.settings import get_settings\n"
        "from shared.wiring import build_tracing\n"
        "t = build_tracing(get_settings())\n"
        "print(json.dumps({'impl': type(t).__name__, 'capture': t.capture_content,\n"
        "                  'otel': any(m.startswith('opentelemetry') for m in sys.modules)}))\n"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**base, "PYTHONPATH": str(ROOT), **env},
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    return dict(json.loads(out.stdout))


def test_tracing_is_off_without_an_endpoint_and_imports_no_opentelemetry():
    # Given no OTLP endpoint in the environment
    # When the ports' tracing is built
    got = _probe({})
    # Then it is the no-op, and no OpenTelemetry module was imported
    assert got == {"impl": "NoTracing", "capture": False, "otel": False}


def test_an_endpoint_turns_tracing_on_and_content_stays_off_unless_opted_in():
    # Given an endpoint (and then the content opt-in as well)
    # When the tracing is built
    plain = _probe({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces"})
    opted = _probe(
        {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces",
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
        }
    )
    # Then it is OpenTelemetry's, with content only where opted in
    assert plain == {"impl": "OtelTracing", "capture": False, "otel": True}
    assert opted == {"impl": "OtelTracing", "capture": True, "otel": True}


def test_spans_are_posted_as_otlp_json(receiver):
    from shared.telemetry.otel import OtelTracing

    # Given the OTLP/JSON tracing pointed at the loopback receiver
    tracing = OtelTracing.otlp(receiver.url, service_name="openwop-serverless")
    # When a run span, a client child and a failing child end and the tracing is flushed
    with tracing.span("openwop.run", {"openwop.run.id": "tenant-a/r-1", "openwop.tenant": "tenant-a"}):
        parent = tracing.current()
        with tracing.span(
            "chat m", {"gen_ai.usage.input_tokens": 21, "gen_ai.request.temperature": 0.5}, kind="client"
        ) as span:
            span.set("gen_ai.response.finish_reasons", ["end_turn"])
            span.set("openwop.replay.diverged", True)
        with pytest.raises(RuntimeError), tracing.span("execute_tool t"):
            raise RuntimeError("a message with sk-secret-value")
    tracing.flush()
    # Then one OTLP/JSON request carries them, grouped by resource and scope, ids in hex, ints as strings
    assert [(p, ct) for p, ct, _ in receiver.posts] == [("/v1/traces", "application/json")]
    body = receiver.posts[0][2]
    rs = body["resourceSpans"]
    assert len(rs) == 1
    assert {"key": "service.name", "value": {"stringValue": "openwop-serverless"}} in rs[0]["resource"]["attributes"]
    scope = rs[0]["scopeSpans"]
    assert [s["scope"]["name"] for s in scope] == ["openwop-serverless"]
    spans = {s["name"]: s for s in scope[0]["spans"]}
    assert set(spans) == {"openwop.run", "chat m", "execute_tool t"}
    run, chat, tool = spans["openwop.run"], spans["chat m"], spans["execute_tool t"]
    assert len(run["traceId"]) == 32 and len(run["spanId"]) == 16 and "parentSpanId" not in run
    assert parent == f"00-{run['traceId']}-{run['spanId']}-{parent[-2:]}"
    assert chat["traceId"] == run["traceId"] and chat["parentSpanId"] == run["spanId"]
    assert (run["kind"], chat["kind"]) == (1, 3)  # SPAN_KIND_INTERNAL, SPAN_KIND_CLIENT
    assert _attrs(chat) == {
        "gen_ai.usage.input_tokens": {"intValue": "21"},
        "gen_ai.request.temperature": {"doubleValue": 0.5},
        "gen_ai.response.finish_reasons": {"arrayValue": {"values": [{"stringValue": "end_turn"}]}},
        "openwop.replay.diverged": {"boolValue": True},
    }
    assert int(chat["endTimeUnixNano"]) >= int(chat["startTimeUnixNano"]) > 0
    # and a failed span says only its error type: no exception text, no event
    assert tool["status"] == {"code": 2} and _attrs(tool) == {"error.type": {"stringValue": "RuntimeError"}}
    assert "sk-secret-value" not in json.dumps(body)


def test_a_receiver_that_is_down_loses_the_batch_and_nothing_else():
    from opentelemetry.sdk.trace.export import SpanExportResult

    from shared.telemetry.otel import OtelTracing
    from shared.telemetry.otlp_json import OtlpJsonSpanExporter

    # Given an endpoint where nothing listens (a port just closed)
    with Receiver() as r:
        url = r.url
    exporter = OtlpJsonSpanExporter(url, timeout_s=1.0)
    tracing = OtelTracing(exporter, service_name="x", batch=False)
    # When a span ends (exported at once) and the tracing is flushed
    with tracing.span("openwop.run", {"openwop.run.id": "r"}) as span:
        span.set("k", "v")
    tracing.flush()
    # Then the work went on, and a direct export reports the failure rather than raising
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("t").start_as_current_span("s"):
        pass
    assert exporter.export(memory.get_finished_spans()) == SpanExportResult.FAILURE
