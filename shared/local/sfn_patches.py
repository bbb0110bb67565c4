"""Step Functions patches of the embedded AWS (4, 5, 7, 8 and 12 in ``shared.local.patches``): ``startExecution``
casing, stopping an execution that waits for a task token, the Distributed Map worker's loop, an execution's end
seen whole, and ``fast_waits`` (tests only)."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

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


def patch_sfn_start_execution() -> None:
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


def patch_sfn_stop_wakes_callbacks() -> None:
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

    # A task that fails after the stop (a Lambda that was already running when it came) must not turn the stopped
    # program into a failed one: moto's Environment.set_error replaces any program state, so the execution ended
    # FAILED; on AWS a stopped execution is ABORTED whatever its tasks answer afterwards.
    from moto.stepfunctions.parser.asl.eval.environment import Environment
    from moto.stepfunctions.parser.asl.eval.program_state import ProgramStopped

    set_error = Environment.set_error

    def keep_stopped(self: Any, error: Any) -> None:
        if not isinstance(self.program_state(), ProgramStopped):
            set_error(self, error)

    Environment.set_error = keep_stopped  # type: ignore[method-assign]


def patch_sfn_distributed_map_worker_loop() -> None:
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


def patch_sfn_end_seen_whole() -> None:
    """Patch 12: an execution's output (or error and cause) is set before its status turns terminal, so a
    ``DescribeExecution`` racing the end never reads ``SUCCEEDED`` without ``output`` (or ``FAILED`` without
    ``error``); moto set the status first."""
    from moto.stepfunctions.parser.asl.eval.program_state import ProgramEnded, ProgramError
    from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication

    original = BaseExecutionWorkerCommunication._reflect_execution_status

    def reflect(self: Any) -> None:
        execution = self.execution
        state = execution.exec_worker.env.program_state()
        if isinstance(state, ProgramEnded):
            execution.output = execution.exec_worker.env.states.get_input()
        elif isinstance(state, ProgramError) and state.error is not None:
            execution.error = state.error.get("error")
            execution.cause = state.error.get("cause")
        original(self)

    BaseExecutionWorkerCommunication._reflect_execution_status = reflect  # type: ignore[method-assign]


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


PARSED_KEPT = 256  # definitions whose parse trees a process keeps (a host has a few dozen state machines)


def patch_sfn_parse_once() -> None:
    """Patch 17: a definition is lexed and parsed once per process (``AmazonStateLanguageParser.parse``); each call
    still builds its own evaluation components from the kept parse tree (``Preprocessor``), so no execution shares
    state with another. moto parsed the definition with ANTLR's pure-Python runtime on every execution start."""
    from moto.stepfunctions.parser.asl.parse import asl_parser
    from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor

    parser = asl_parser.AmazonStateLanguageParser
    original = parser.parse
    trees: dict[str, Any] = {}
    lock = threading.Lock()

    def parse(definition: str) -> Any:
        tree = trees.get(definition)
        if tree is None:
            program, tree = original(definition)  # a definition that does not parse raises and is not kept
            with lock:
                if len(trees) >= PARSED_KEPT:
                    trees.pop(next(iter(trees)))
                trees[definition] = tree
            return program, tree
        return Preprocessor().visit(tree), tree

    parser.parse = staticmethod(parse)  # type: ignore[method-assign]
