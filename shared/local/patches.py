"""Patches to moto 5.2.5 internals that make the embedded AWS faithful enough to run our real code.

Every patch is pinned to moto 5.2.5 (see pyproject ``local`` extra) and names the upstream issue it works
around. ``apply_patches()`` is idempotent; nothing here runs at import time.

1. Lambda registry (no upstream fix planned: moto's no-Docker Lambda echoes the payload by design):
   ``LambdaBackend.invoke`` / ``LambdaSimpleBackend.invoke`` run the real ``lambda_handler`` in-process.
2. DynamoDB Streams → Lambda event-source mapping (moto always takes the Docker path and drops the records):
   ``LambdaBackend.send_dynamodb_items`` delivers the stream event to the real handler on a background worker
   per consuming function (a backlog coalesced into batches of up to 100 records, as the AWS poller does);
   ``StreamRecord.__init__`` marks TTL deletions with the TTL service identity (see ``shared.local.ttl``).
3. (removed: JSONata. No ASL file of ours uses ``QueryLanguage: JSONata``; moto 5.2.5 fails such states,
   getmoto/moto#10105, and ``tests/unit`` checks that none of our state machines uses JSONata.)
4. ``states:startExecution`` casing (getmoto/moto#10076, PR #10101): PascalCase parameters go straight to boto3.
5. ``fast_waits()`` (test-only, never applied by default): Wait states and Retry intervals become instant.
6. ``TransactWriteItems`` without deep-copying whole tables per item (``shared.local.ddb_transactions``).
7. ``StopExecution`` of an execution waiting in a ``.waitForTaskToken`` task (no upstream issue filed yet):
   moto sets the program state to stopped but the task's thread keeps waiting on its callback endpoint with no
   timeout, so the execution stays ``RUNNING`` forever; AWS aborts it at once. Stopping also completes the
   waiting callbacks with an empty success (an error outcome would overwrite the stop and end ``FAILED``); the
   stopped program runs no further state, so the execution ends ``ABORTED``.
8. A Distributed Map's worker takes its next item by recursion (``DistributedItemProcessorWorker._eval_pool``,
   no upstream issue filed yet): at Python's default recursion limit, which the local stack keeps (Lambda runs
   at it), a worker fails after ~980 items, so an eval of more than ~4,000 task-trials cannot finish locally; AWS
   has no such bound. The patch runs the same steps in a loop.

When upstream fixes land (a moto release with #10101): bump the pin, delete the corresponding
``_patch_*`` function and its call in ``apply_patches``, and keep the canary test in
``tests/integration/test_local_patches.py`` — it must still pass on the unpatched, fixed moto.
"""

from __future__ import annotations

import datetime
import json
import logging
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from shared.local.context import (
    Handler,
    LambdaContext,
    context_for,
    function_name_from,
    load_handler,
    manifest_function_by_local_name,
)

PINNED_MOTO = "5.2.5"
TTL_IDENTITY: dict[str, str] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}

log = logging.getLogger("shared.local")

_apply_lock = threading.Lock()
_applied = False


# ---------------------------------------------------------------------------------------------------------------------
# Lambda registry: which Python callable answers for a Lambda function name
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Target:
    name: str
    handler: Callable[[], Handler]
    context: Callable[[], LambdaContext]


_extra_handlers: dict[str, _Target] = {}


def register_handler(local_name: str, handler: Handler, *, memory_mb: int = 128, timeout_s: int = 30) -> None:
    """Make ``local_name`` (a Lambda function that exists in moto) run ``handler``. For tests and tooling only;
    manifest functions need no registration."""
    _extra_handlers[local_name] = _Target(
        local_name,
        lambda: handler,
        lambda: LambdaContext(local_name, memory_limit_in_mb=memory_mb, timeout_s=timeout_s),
    )


def unregister_handler(local_name: str) -> None:
    _extra_handlers.pop(local_name, None)


class LocalHandlerNotFoundError(LookupError):
    """No manifest function and no registered handler has this Lambda name."""


def resolve_target(name_or_arn: str) -> _Target:
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
    return _Target(name, lambda: load_handler(fn), lambda: context_for(fn))


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


def invoke_target(target: _Target, event: Any) -> tuple[Any, dict[str, Any] | None]:
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


def _patch_lambda_invoke() -> None:
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
            threading.Thread(target=invoke_target, args=(target, event), daemon=True).start()
            return b""
        result, error = invoke_target(target, event)
        if error is None:
            try:
                return json.dumps(result).encode("utf-8")
            except (TypeError, ValueError) as exc:  # the Python runtime's answer to an unserializable result
                error = {"errorMessage": f"Unable to marshal response: {exc}", "errorType": "Runtime.MarshalError"}
        response_headers["x-amz-function-error"] = "Unhandled"
        return json.dumps(error).encode("utf-8")

    LambdaBackend.invoke = invoke  # type: ignore[method-assign]
    LambdaSimpleBackend.invoke = invoke  # type: ignore[method-assign]


# ---------------------------------------------------------------------------------------------------------------------
# DynamoDB Streams → Lambda
# ---------------------------------------------------------------------------------------------------------------------


@dataclass
class StreamDeliveryError:
    function: str
    error: dict[str, Any]
    event: dict[str, Any]


_stream_errors: list[StreamDeliveryError] = []
STREAM_BATCH_SIZE = 100  # records per invocation, as the CDK event source mappings


@dataclass
class _StreamWorker:
    """One background worker per consuming function delivers its stream batches in order, like one event source
    mapping reading one shard: batches queued while the handler ran are coalesced into one invocation of up to
    ``STREAM_BATCH_SIZE`` records (as the AWS poller batches a shard's backlog)."""

    name: str
    attempts: int = 3
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _queue: deque[tuple[_Target, dict[str, Any]]] = field(default_factory=deque)
    _busy: bool = False
    _thread: threading.Thread | None = None
    _seen: set[str] = field(default_factory=set)  # eventIDs already queued: moto may hand a record over twice
    _seen_order: deque[str] = field(default_factory=deque)
    _current: tuple[str, dict[str, Any]] | None = None  # the batch being delivered
    _delivered: bool = False  # a batch was delivered since the worker last went idle

    def submit(self, target: _Target, event: dict[str, Any]) -> None:
        with self._cond:
            fresh = [r for r in event["Records"] if r["eventID"] not in self._seen]
            if not fresh:
                return
            for record in fresh:
                self._seen.add(record["eventID"])
                self._seen_order.append(record["eventID"])
            while len(self._seen_order) > 10_000:
                self._seen.discard(self._seen_order.popleft())
            self._queue.append((target, {"Records": fresh}))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=f"openwop-ddb-stream-{self.name}",
                                                daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            announce = False
            with self._cond:
                while not self._queue:
                    self._busy = False
                    self._cond.notify_all()
                    if self._delivered:  # drained: say so once (outside the condition), then wait
                        self._delivered, announce = False, True
                        break
                    self._cond.wait()
                if not announce:
                    target, event = self._queue.popleft()
                    records = list(event["Records"])
                    while self._queue and len(records) + len(self._queue[0][1]["Records"]) <= STREAM_BATCH_SIZE:
                        records.extend(self._queue.popleft()[1]["Records"])
                    self._busy = True
                    self._current = (target.name, {"Records": records})
            if announce:
                listener = _idle_listener
                if listener is not None:
                    listener(self)  # it takes the journal's lock, then asks idle(): never under the condition
                continue
            self._deliver(target, {"Records": records})
            with self._cond:
                self._current = None
                self._delivered = True

    def pending(self) -> list[tuple[str, dict[str, Any]]]:
        """The batches not yet delivered, the one being delivered first: ``[(function name, stream event)]``."""
        with self._cond:
            batches = [self._current] if self._current is not None else []
            return batches + [(target.name, event) for target, event in self._queue]

    def _deliver(self, target: _Target, event: dict[str, Any]) -> None:
        for attempt in range(1, self.attempts + 1):
            _, error = invoke_target(target, event)
            if error is None:
                return
            if attempt == self.attempts:
                log.error("stream batch for %s dropped after %d attempts: %s", target.name, attempt, error)
                _stream_errors.append(StreamDeliveryError(target.name, error, event))
            else:
                time.sleep(0.05 * attempt)

    def idle(self) -> bool:
        with self._cond:
            return not self._queue and not self._busy

    def wait_idle(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue and not self._busy, timeout=timeout)


_stream_workers: dict[str, _StreamWorker] = {}
_stream_workers_lock = threading.Lock()
_idle_listener: Callable[[_StreamWorker], None] | None = None


def on_stream_idle(listener: Callable[[_StreamWorker], None] | None) -> None:
    """Call ``listener(worker)`` each time a stream worker has delivered everything queued to it (the local
    state's journal marks it, so a restart does not deliver those records again); ``None`` removes it."""
    global _idle_listener
    _idle_listener = listener


def pending_stream_batches() -> list[tuple[str, dict[str, Any]]]:
    """Every stream batch queued or being delivered, by consuming function: what a snapshot keeps."""
    with _stream_workers_lock:
        workers = list(_stream_workers.values())
    return [batch for worker in workers for batch in worker.pending()]


def deliver_stream_batch(function_name: str, event: dict[str, Any]) -> None:
    """Queue a stream batch for its consuming function again (a batch a restart found undelivered)."""
    _stream_worker_for(function_name).submit(resolve_target(function_name), event)


def _stream_worker_for(name: str) -> _StreamWorker:
    with _stream_workers_lock:
        worker = _stream_workers.get(name)
        if worker is None:
            worker = _stream_workers[name] = _StreamWorker(name)
        return worker


def wait_for_stream_idle(timeout: float = 10.0) -> bool:
    """Block until every DynamoDB stream batch produced so far (and the batches its handlers caused) has been
    delivered, by every consuming function. Returns False on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        with _stream_workers_lock:
            workers = list(_stream_workers.values())
        for worker in workers:
            if not worker.wait_idle(max(0.0, deadline - time.monotonic())):
                return False
        with _stream_workers_lock:
            if all(w.idle() for w in _stream_workers.values()):
                return True
        if time.monotonic() > deadline:
            return False


def stream_delivery_errors() -> list[StreamDeliveryError]:
    """Batches whose handler kept failing (delivered ``attempts`` times, then dropped). Tests may assert it empty."""
    return list(_stream_errors)


def _epoch_seconds(value: Any) -> Any:
    from moto.core.utils import unix_time  # moto's datetimes are naive UTC

    return int(unix_time(value)) if isinstance(value, datetime.datetime) else value


def _patch_stream_delivery() -> None:
    """DynamoDB Streams → Lambda event-source mapping. moto's ``send_dynamodb_items`` calls
    ``LambdaFunction.invoke``, which always takes the Docker path (even with ``use_docker: False``), fails and
    drops the records (research/tooling.md §1a). Deliver them instead as an AWS-shaped stream event to the real
    handler, asynchronously (as the AWS poller does) on one ordered worker; ``wait_for_stream_idle()`` lets tests
    wait. moto does not apply FilterCriteria or batching windows: handlers filter for themselves."""
    from moto.awslambda.models import LambdaBackend

    def send_dynamodb_items(self: LambdaBackend, function_arn: str, items: list[Any], source: str) -> bytes:
        records = []
        for item in items:
            raw = item.to_json()
            dynamodb = dict(raw["dynamodb"])
            dynamodb["ApproximateCreationDateTime"] = _epoch_seconds(dynamodb.get("ApproximateCreationDateTime"))
            record: dict[str, Any] = {
                "eventID": raw["eventID"],
                "eventName": raw["eventName"],
                "eventVersion": "1.1",
                "eventSource": "aws:dynamodb",
                "awsRegion": self.region_name,
                "dynamodb": json.loads(json.dumps(dynamodb, default=str)),
                "eventSourceARN": source,
            }
            if "userIdentity" in raw:
                record["userIdentity"] = dict(raw["userIdentity"])
            records.append(record)
        try:
            target = resolve_target(function_arn)
        except LocalHandlerNotFoundError as exc:
            log.error("%s; %d stream records dropped", exc, len(records))
            _stream_errors.append(
                StreamDeliveryError(function_name_from(function_arn), {"errorMessage": str(exc)}, {"Records": records})
            )
            return b"dropped"
        _stream_worker_for(target.name).submit(target, {"Records": records})
        return b"queued"  # truthy: moto clears the shard's pending items, as its own ESM path does

    LambdaBackend.send_dynamodb_items = send_dynamodb_items  # type: ignore[method-assign]


_ttl_lock = threading.Lock()
_ttl_pending: set[tuple[str, str]] = set()


def _key_id(keys: dict[str, Any]) -> str:
    return json.dumps(keys, sort_keys=True, separators=(",", ":"))


@contextmanager
def ttl_deletion(table_name: str, keys: dict[str, Any]) -> Iterator[None]:
    """While active, the REMOVE stream record of this exact item (table + DynamoDB-JSON key) carries the TTL
    service identity, as real DynamoDB sets it on TTL expiry. Used by ``shared.local.ttl.ttl_sweep``."""
    entry = (table_name, _key_id(keys))
    with _ttl_lock:
        _ttl_pending.add(entry)
    try:
        yield
    finally:
        with _ttl_lock:
            _ttl_pending.discard(entry)


def _patch_stream_record_identity() -> None:
    """TTL deletions. moto never expires items (no upstream sweeper), so ``ttl_sweep`` deletes them through the
    API; wrap ``StreamRecord.__init__`` so those deletions' REMOVE records carry
    ``userIdentity {type: Service, principalId: dynamodb.amazonaws.com}`` like AWS's TTL service."""
    from moto.dynamodb.models.table import StreamRecord

    original = StreamRecord.__init__

    def init(self: Any, table: Any, stream_type: str, event_name: str, old: Any, new: Any, seq: int) -> None:
        original(self, table, stream_type, event_name, old, new, seq)
        if event_name == "REMOVE" and _ttl_pending:
            entry = (table.name, _key_id(self.record["dynamodb"]["Keys"]))
            with _ttl_lock:
                marked = entry in _ttl_pending
            if marked:
                self.record["userIdentity"] = dict(TTL_IDENTITY)

    StreamRecord.__init__ = init  # type: ignore[method-assign]


# ---------------------------------------------------------------------------------------------------------------------
# Step Functions
# ---------------------------------------------------------------------------------------------------------------------


_sfn_model_lock = threading.Lock()
_sfn_model: Any = None


def _sfn_operation(action: str) -> Any:
    """The botocore operation model of a Step Functions action given in snake case (``start_execution``)."""
    global _sfn_model
    import botocore.session
    from botocore import xform_name

    with _sfn_model_lock:
        if _sfn_model is None:
            _sfn_model = botocore.session.get_session().get_service_model("stepfunctions")
    for name in _sfn_model.operation_names:
        if xform_name(name) == action:
            return _sfn_model.operation_model(name)
    return None


def _dates_to_epoch_millis(value: Any) -> Any:
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, dict):
        for k, v in value.items():
            value[k] = _dates_to_epoch_millis(v)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            value[i] = _dates_to_epoch_millis(v)
    return value


def _patch_sfn_start_execution() -> None:
    """``states:startExecution`` / ``.sync`` / ``.sync:2`` (getmoto/moto#10076, fix in open PR #10101).
    moto's port reduced the base ``_normalise_parameters``/``_normalise_response`` to ``pass``, so the ASL
    PascalCase parameters (``StateMachineArn``, ``Input``) reach boto3 unchanged (``KeyError: 'Input'``) and the
    lowerCamel response (``executionArn``) never becomes ``ExecutionArn``. Convert both ways with the botocore
    shapes, as LocalStack does, and render dates as epoch milliseconds like the AWS integration output."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sfn import (
        StateTaskServiceSfn,
    )

    original = StateTaskServiceSfn._normalise_parameters

    def normalise_parameters(
        self: Any,
        parameters: dict[str, Any],
        boto_service_name: str | None = None,
        service_action_name: str | None = None,
    ) -> None:
        original(self, parameters, boto_service_name, service_action_name)  # stringifies Input
        op = _sfn_operation(self._get_boto_service_action(service_action_name))
        if op is not None and op.input_shape is not None:
            self._to_boto_request(parameters, op.input_shape)

    def normalise_response(
        self: Any, response: Any, boto_service_name: str | None = None, service_action_name: str | None = None
    ) -> None:
        op = _sfn_operation(self._get_boto_service_action(service_action_name))
        if op is not None and op.output_shape is not None:
            self._from_boto_response(response, op.output_shape)
        _dates_to_epoch_millis(response)

    StateTaskServiceSfn._normalise_parameters = normalise_parameters  # type: ignore[method-assign]
    StateTaskServiceSfn._normalise_response = normalise_response  # type: ignore[method-assign]


def _patch_sfn_stop_wakes_callbacks() -> None:
    """Patch 7: ``ExecutionWorker.stop`` also releases every callback endpoint of the execution, so a task
    waiting for its token notices the stop (as on AWS, where StopExecution aborts a waiting execution)."""
    from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackOutcomeSuccess
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

    original = ExecutionWorker.stop

    def stop(self: Any, stop_date: datetime.datetime, error: str | None, cause: str | None) -> None:
        original(self, stop_date=stop_date, error=error, cause=cause)
        for callback_id, endpoint in list(self.env.callback_pool_manager._pool.items()):
            if endpoint.get_outcome() is None:
                endpoint.notify(CallbackOutcomeSuccess(callback_id=callback_id, output="{}"))

    ExecutionWorker.stop = stop  # type: ignore[method-assign]


def _patch_sfn_distributed_map_worker_loop() -> None:
    """Patch 8: the Distributed Map worker's job loop, iterative (moto's recurses once per item)."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.itemprocessor import (
        distributed_item_processor_worker as worker,
    )

    def _eval_pool(self: Any, job: Any, worker_frame: Any) -> None:
        while job is not None:
            job_frame = worker_frame.open_inner_frame()
            self._eval_job(env=job_frame, job=job)
            worker_frame.delete_frame(job_frame)
            if isinstance(job.job_output, Exception) or self.stopped():
                break
            next_job = self._job_pool.next_job()
            if next_job is None:
                break  # the frame is closed before the job, as moto does: the Map awaits jobs, not workers
            self._job_pool.close_job(job)
            job = next_job
        self._env.delete_frame(worker_frame)
        if job is not None:
            self._job_pool.close_job(job)

    worker.DistributedItemProcessorWorker._eval_pool = _eval_pool  # type: ignore[method-assign]


@contextmanager
def fast_waits() -> Iterator[None]:
    """TEST ONLY. While active, Wait states and Retry intervals take no time (moto's interpreter really sleeps:
    ``WaitFunction._wait_interval`` and ``retrier_decl.time.sleep``). Never applied by default: holds in
    workflows must really wait. Process-wide while active, so it also affects executions already running."""
    from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
    from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import WaitFunction

    class _NoSleep:
        @staticmethod
        def sleep(_seconds: float) -> None:
            return None

    original_wait = WaitFunction._wait_interval
    original_time = getattr(retrier_decl, "time")  # noqa: B009 - the module's own `import time`

    def no_wait(self: Any, env: Any, wait_seconds: int) -> None:
        return None

    WaitFunction._wait_interval = no_wait  # type: ignore[method-assign]
    setattr(retrier_decl, "time", _NoSleep)  # noqa: B010
    try:
        yield
    finally:
        WaitFunction._wait_interval = original_wait  # type: ignore[method-assign]
        setattr(retrier_decl, "time", original_time)  # noqa: B010


# ---------------------------------------------------------------------------------------------------------------------


def apply_patches() -> None:
    """Apply every permanent patch once (idempotent, thread-safe). Warns when moto is not the pinned version."""
    global _applied
    with _apply_lock:
        if _applied:
            return
        import moto

        if moto.__version__ != PINNED_MOTO:
            log.warning("shared.local patches target moto %s, found %s", PINNED_MOTO, moto.__version__)
        _patch_lambda_invoke()
        _patch_stream_delivery()
        _patch_stream_record_identity()
        _patch_sfn_start_execution()
        _patch_sfn_stop_wakes_callbacks()
        _patch_sfn_distributed_map_worker_loop()
        from shared.local.ddb_transactions import apply_transaction_patch

        apply_transaction_patch()  # TransactWriteItems without a table deep-copy per item
        _applied = True
