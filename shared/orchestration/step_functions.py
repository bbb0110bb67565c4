"""Start and stop executions of the ASL state machines in statemachines/."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from botocore.exceptions import ClientError

from shared.ports.orchestration import ExecutionStartThrottledError

NAME_MAX = 80  # Step Functions' limit on an execution name
DIGEST_CHARS = 16  # 64 bits of SHA-256: two runs' names collide with odds of ~1e-19 per pair


def execution_name(run_id: str, machine: str, *, generation: int = 0, redelivery: bool = False) -> str:
    """The execution of ``run_id`` on ``machine``: idempotent per run, purpose and generation, at most 80 characters.

    '/' is not allowed in a name (it becomes ``--``). Generation n > 0 is the n-th continuation of a long run
    (continue-as-new): suffix ``-g<n>``; a redelivery (the durability hook's second delivery of the same work) adds
    ``-r``. A name that fits is the readable one; one that would not keeps its head and ends with a digest of the
    whole, so two long run ids that share their first ~60 characters never share an execution (decision 0141).
    """
    suffix = (f"-g{generation}" if generation else "") + ("-r" if redelivery else "")
    base = run_id.replace("/", "--") + "-" + machine
    if len(base) + len(suffix) <= NAME_MAX:
        return base + suffix
    digest = hashlib.sha256(base.encode()).hexdigest()[:DIGEST_CHARS]
    return base[: NAME_MAX - len(suffix) - DIGEST_CHARS - 1] + "-" + digest + suffix


def _execution_arn(machine_arn: str, name: str) -> str:
    """An execution's ARN: its name under its state machine's (``...:stateMachine:M`` -> ``...:execution:M:name``)."""
    return machine_arn.replace(":stateMachine:", ":execution:") + ":" + name


class StepFunctionsOrchestrator:
    def __init__(self, client: Any, machines: dict[str, str]) -> None:
        self._c = client
        self._machines = machines

    def start(
        self,
        machine: str,
        run_id: str,
        payload: dict[str, Any],
        *,
        generation: int = 0,
        redelivery: bool = False,
        machine_arn: str = "",
        purpose: str = "",
    ) -> str:
        name = execution_name(run_id, purpose or machine, generation=generation, redelivery=redelivery)
        # A run task continuing its run names its own machine: deployed, a task function has no machine ARN in its
        # environment (the machine refers to the function, so the function cannot refer back to the machine).
        arn = machine_arn or self._machines[machine]
        try:
            resp = self._c.start_execution(stateMachineArn=arn, name=name, input=json.dumps(payload))
            return str(resp["executionArn"])
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code == "ExecutionAlreadyExists":
                return _execution_arn(arn, name)
            if code == "ThrottlingException":  # after botocore's retries: a run task's machine retries it (0191)
                raise ExecutionStartThrottledError(f"StartExecution throttled: {name}") from exc
            raise

    def execution_name(self, machine: str, run_id: str) -> str:
        return execution_name(run_id, machine)

    def execution_arn(self, machine: str, run_id: str) -> str | None:
        arn = self._machines.get(machine)
        return _execution_arn(arn, execution_name(run_id, machine)) if arn else None

    def can_start(self, machine: str) -> bool:
        return bool(self._machines.get(machine))

    def resume(self, task_token: str) -> None:
        """Let an execution waiting on ``task_token`` (a ``.waitForTaskToken`` task) go on; a spent token is a no-op."""
        try:
            self._c.send_task_success(taskToken=task_token, output="{}")
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in ("TaskDoesNotExist", "TaskTimedOut", "InvalidToken"):
                raise

    def stop(self, execution_arn: str) -> None:
        try:
            self._c.stop_execution(executionArn=execution_arn, cause="run cancelled")
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in ("ExecutionDoesNotExist", "ValidationException"):
                raise
