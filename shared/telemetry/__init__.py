"""Telemetry out of the host: the Tracing port on OpenTelemetry (``otel``), built only by ``shared.wiring``."""
