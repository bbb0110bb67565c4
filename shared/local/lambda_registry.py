"""The Lambda registry of the embedded AWS: which Python callable answers for a Lambda function name, and the moto
patch (1 in ``shared.local.patches``) that makes moto's ``invoke`` run it in-process."""

from __future__ import annotations

import json
import logging
import threading
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from typing import Any

from shared.local import reserved
from shared.local.context import (
    Handler,
    LambdaContext,
    context_for,
    function_name_from,
    load_handler,
    manifest_function_by_local_name,
)

log = logging.getLogger("shared.local")


@dataclass(frozen=True)
class Target:
    name: str
    handler: Callable[[], Handler]
    context: Callable[[], LambdaContext]


_extra_handlers: dict[str, Target] = {}


def register_handler(local_name: str, handler: Handler, *, memory_mb: int = 128, timeout_s: int = 30) -> None:
    """Make ``local_name`` (a Lambda function that exists in moto) run ``handler``. For tests and tooling only;
    manifest functions need no registration."""
    _extra_handlers[local_name] = Target(
        local_name,
        lambda: handler,
        lambda: LambdaContext(local_name, memory_limit_in_mb=memory_mb, timeout_s=timeout_s),
    )


def unregister_handler(local_name: str) -> None:
    _extra_handlers.pop(local_name, None)


class LocalHandlerNotFoundError(LookupError):
    """No manifest function and no registered handler has this Lambda name."""


def resolve_target(name_or_arn: str) -> Target:
    """Find the handler for a Lambda function name or ARN; raise ``LocalHandlerNotFoundError`` if none."""
    name = function_name_from(name_or_arn)
    extra = _extra_handlers.get(name)
    if extra is not None:
        return extra
    fn = manifest_function_by_local_name(name)
    if fn is None:
        raise LocalHandlerNotFoundError(
            f"openwop local: no handler for Lambda function {name!r} "
            "(not a shared.manifest function local_name and not registered with register_handler)"
        )
    return Target(name, lambda: load_handler(fn), lambda: context_for(fn))


InvocationObserver = Callable[[str, Any], AbstractContextManager[Any]]
_invocation_observers: list[InvocationObserver] = []


def observe_invocations(observer: InvocationObserver) -> Callable[[], None]:
    """Run ``observer(function_name, event)`` as a context around every in-process Lambda invocation (Step
    Functions tasks, async invokes, stream batches), on the thread that runs the handler. For tooling (the bench's
    request meter attributes a task's AWS requests to its run); returns the function that removes the observer."""
    _invocation_observers.append(observer)

    def remove() -> None:
        if observer in _invocation_observers:
            _invocation_observers.remove(observer)

    return remove


def invoke_target(target: Target, event: Any) -> tuple[Any, dict[str, Any] | None]:
    """Run one invocation: ``(result, None)`` on success, ``(None, error_payload)`` if the handler raised.

    The error payload has the shape the AWS Python runtime returns for an unhandled exception, so Step Functions
    sees the exception class name as the error name."""
    context = target.context()
    try:
        with ExitStack() as observed:
            for observer in tuple(_invocation_observers):
                observed.enter_context(observer(target.name, event))
            return target.handler()(event, context), None
    except Exception as exc:  # noqa: BLE001 - every handler failure becomes a Lambda function error
        log.warning("lambda %s raised %s: %s", target.name, type(exc).__name__, exc)
        return None, {
            "errorMessage": str(exc),
            "errorType": type(exc).__name__,
            "requestId": context.aws_request_id,
            "stackTrace": traceback.format_list(traceback.extract_tb(exc.__traceback__)),
        }


def _answer(result: Any, error: dict[str, Any] | None, response_headers: Any) -> bytes:
    """A synchronous invocation's response body (and its function-error header when the handler failed)."""
    if error is None:
        try:
            return json.dumps(result).encode("utf-8")
        except (TypeError, ValueError) as exc:  # the Python runtime's answer to an unserializable result
            error = {"errorMessage": f"Unable to marshal response: {exc}", "errorType": "Runtime.MarshalError"}
    response_headers["x-amz-function-error"] = "Unhandled"
    return json.dumps(error).encode("utf-8")


def _invoke_when_free(target: Target, event: Any) -> None:
    """An asynchronous invocation: Lambda's queue holds it until the function has a unit of concurrency free."""
    unit = reserved.acquire(target.name, wait=True)
    try:
        invoke_target(target, event)
    finally:
        reserved.release(unit)


def patch_lambda_invoke() -> None:
    """Lambda registry. moto's no-Docker backend (``LambdaSimpleBackend.invoke``) echoes the request payload and
    an unknown handler silently "succeeds"; the Docker backend fails without Docker. Replace both ``invoke``s:
    the function must exist in moto (``ResourceNotFoundException`` otherwise, as on AWS), its handler must be
    known (manifest ``local_name`` or ``register_handler``; otherwise the call fails loudly), and a raised
    exception becomes ``x-amz-function-error: Unhandled`` with ``{errorType, errorMessage, stackTrace}``.
    No upstream issue: moto does not run Python callables by design (see research/tooling.md §1c)."""
    from moto.awslambda.exceptions import InvalidParameterValueException, LambdaClientError
    from moto.awslambda.models import LambdaBackend
    from moto.awslambda_simple.models import LambdaSimpleBackend

    class LocalHandlerNotFound(LambdaClientError):
        code = 404

        def __init__(self, message: str) -> None:
            super().__init__("ResourceNotFoundException", message)

    class TooManyRequests(LambdaClientError):
        code = 429

        def __init__(self, message: str) -> None:
            super().__init__("TooManyRequestsException", message)

    def invoke(
        self: LambdaBackend,
        function_name: str,
        qualifier: str | None,
        body: Any,
        headers: Any,
        response_headers: Any,
    ) -> bytes:
        self.get_function(function_name, qualifier)  # raises UnknownFunctionException like AWS
        try:
            target = resolve_target(function_name)
        except LocalHandlerNotFoundError as exc:
            raise LocalHandlerNotFound(str(exc)) from exc
        raw = body.decode("utf-8") if isinstance(body, bytes) else (body or "")
        try:
            event = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            raise InvalidParameterValueException(f"Could not parse request body into json: {exc}") from exc
        invocation_type = (headers.get("X-Amz-Invocation-Type") if headers else None) or "RequestResponse"
        if invocation_type == "DryRun":
            return b""
        if invocation_type == "Event":
            threading.Thread(target=_invoke_when_free, args=(target, event), daemon=True).start()
            return b""
        try:  # the function's reserved concurrency: past it, Lambda's 429 (a task's Retry takes it)
            unit = reserved.acquire(target.name)
        except reserved.Throttled as exc:
            raise TooManyRequests(str(exc)) from exc
        try:
            result, error = invoke_target(target, event)
        finally:
            reserved.release(unit)
        return _answer(result, error, response_headers)

    LambdaBackend.invoke = invoke  # type: ignore[method-assign]
    LambdaSimpleBackend.invoke = invoke  # type: ignore[method-assign]
