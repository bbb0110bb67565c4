"""Powertools Logger, Tracer and Metrics for every function (API, Step Functions tasks, the erasure hook).

- Logger: JSON, one service name; API requests correlate on the API Gateway request id, tasks on the run id.
- Tracer: X-Ray subsegments for the handler and the AWS SDK calls (``capture_response=False``: run payloads never
  reach a trace), only where tracing is on: in Lambda, unless ``POWERTOOLS_TRACE_DISABLED=true``, and only when
  the X-Ray SDK is installed. The deployed layer leaves it out (it carried a second botocore, 32 MB: see
  docs/decisions/0098-deploy-runtime-and-layer.md); Lambda's active tracing still records every invocation's segment.
- Spans: OpenTelemetry through the Tracing port (``Ports.tracing``, off unless ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
  is set), flushed at the end of each invocation.
- Metrics: CloudWatch EMF (no API call), namespace from ``Settings.metrics_namespace``, flushed by
  ``log_metrics`` at the end of each invocation. A few counters: ``RunsStarted``, ``EvalsStarted``,
  ``RunsFinished``, ``EvalsFinished``, ``RunsFailed``, ``Forks``, ``Refusals`` (4xx answers), ``ServerErrors`` (5xx
  answers), ``RunsErased``. Counters with dimensions are single EMF documents (``count_by``): ``RefusalsByCode``
  (``code``), ``ToolCalls`` (``transport``, ``status``, ``source``) and ``FixtureMisses`` (RFC 0252 misses served
  in eval trials), counted by the task handlers from the engine's ``ToolTally``.
  ``ModelCalls`` (``provider``, ``status``: ``ok`` or the error code) counts requests sent to a model provider
  (answers served from a model-call log are not sent), from the same tally.

Nothing is built at import: Powertools' Tracer imports the X-Ray SDK even when disabled (~250 ms), so the
decorated handler assembles its wrappers on its first invocation, and the Tracer only when tracing is on.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

SERVICE = "openwop-serverless"
H = TypeVar("H", bound=Callable[..., Any])
_lock = threading.Lock()
_built: dict[str, Any] = {}


def _tracing_on() -> bool:
    """Powertools' own rule (in a Lambda environment, unless POWERTOOLS_TRACE_DISABLED is true), and only where the
    X-Ray SDK its Tracer needs is installed (the deployed layer leaves it out)."""
    import importlib.util

    disabled = os.environ.get("POWERTOOLS_TRACE_DISABLED", "false").strip().lower() in ("1", "true", "yes", "on")
    return (
        bool(os.environ.get("LAMBDA_TASK_ROOT"))
        and not disabled
        and importlib.util.find_spec("aws_xray_sdk") is not None
    )


def _tools() -> dict[str, Any]:
    with _lock:
        if not _built:
            import warnings

            from aws_lambda_powertools import Logger, Metrics

            # most invocations (reads) count nothing: that is normal here, not worth a warning per container
            warnings.filterwarnings("ignore", message="No application metrics to publish", category=UserWarning)
            _built["logger"] = Logger(service=SERVICE)  # shares its handler and keys with api.py's Logger
            _built["metrics"] = Metrics(service=SERVICE)
            if _tracing_on():
                from aws_lambda_powertools import Tracer

                _built["tracer"] = Tracer(service=SERVICE)
        return _built


def logger() -> Any:
    return _tools()["logger"]


def count(name: str, value: int = 1) -> None:
    """Add ``value`` to counter ``name`` of this invocation (flushed by ``log_metrics`` at its end)."""
    from aws_lambda_powertools.metrics import MetricUnit
    from aws_lambda_powertools.metrics.functions import is_metrics_disabled

    if is_metrics_disabled():  # a disabled flush never clears: adding would only accumulate (local mode)
        return
    _tools()["metrics"].add_metric(name=name, unit=MetricUnit.Count, value=value)


def count_by(name: str, dimensions: dict[str, str], value: int = 1) -> None:
    """One counter with its own dimensions, printed at once as its own EMF document (Powertools ``single_metric``:
    a ``Metrics`` flush has one dimension set for all its metrics)."""
    from aws_lambda_powertools.metrics import MetricUnit, single_metric
    from aws_lambda_powertools.metrics.functions import is_metrics_disabled

    if is_metrics_disabled() or value <= 0:
        return
    from shared.settings import get_settings

    with single_metric(
        name=name,
        unit=MetricUnit.Count,
        value=value,
        namespace=get_settings().metrics_namespace,
        default_dimensions={"service": SERVICE, **dimensions},
    ):
        pass


def count_tools(tally: Any) -> None:
    """``ToolCalls`` by transport, status and source, and ``FixtureMisses``, from a task's ``ToolTally``."""
    for (transport, status, source), n in sorted(tally.calls.items()):
        count_by("ToolCalls", {"transport": transport, "status": status, "source": source}, n)
    count_by("FixtureMisses", {}, tally.fixture_misses)
    for (provider, status), n in sorted(tally.model_calls.items()):
        count_by("ModelCalls", {"provider": provider, "status": status}, n)


def _correlated(fn: Callable[..., Any], path: str) -> Callable[..., Any]:
    """``fn`` with the correlation id a key of this thread's log context, not of the shared formatter: deployed a
    process runs one invocation at a time, but locally in-process invocations run side by side in threads. (Set
    inside ``inject_lambda_context``, whose ``clear_state`` clears the thread's keys first.)"""
    from aws_lambda_powertools.utilities import jmespath_utils

    def correlated(event: Any, context: Any) -> Any:
        logger().thread_safe_append_keys(correlation_id=jmespath_utils.query(envelope=path, data=event))
        return fn(event, context)

    return correlated


def observed(correlation_id_path: str) -> Callable[[H], H]:
    """Wrap a ``lambda_handler``: correlated logs, a traced handler (no response capture), flushed metrics."""

    def decorate(handler: H) -> H:
        wrapped: list[Callable[..., Any]] = []  # [with a Lambda context, without one (direct calls)]

        @functools.wraps(handler)
        def wrapper(event: Any, context: Any) -> Any:
            tools = _tools()
            if not wrapped:
                fn: Callable[..., Any] = handler
                if "tracer" in tools:
                    fn = tools["tracer"].capture_lambda_handler(fn, capture_response=False)
                fn = tools["metrics"].log_metrics(fn)
                fn = _correlated(fn, correlation_id_path)
                wrapped.append(tools["logger"].inject_lambda_context(clear_state=True)(fn))
                wrapped.append(fn)
            from shared.settings import get_settings

            tools["metrics"].namespace = get_settings().metrics_namespace
            try:
                return wrapped[0 if context is not None else 1](event, context)
            finally:
                from shared.wiring import flush_spans

                flush_spans()  # a frozen container exports nothing: the spans this invocation ended go now

        return wrapper  # type: ignore[return-value]

    return decorate


# Step Functions tasks receive {"runId": ...} or an eval trial item ({"item": {"r": <runId>, ...}}).
task_handler = observed("runId || item.r")
# The erasure hook's batch spans runs: the first record's event id correlates it; each failure logs its run id.
stream_handler = observed("Records[0].eventID")
