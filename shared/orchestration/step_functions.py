"""Start and stop executions of the ASL state machines in statemachines/."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError


class StepFunctionsOrchestrator:
    def __init__(self, client: Any, machines: dict[str, str]) -> None:
        self._c = client
        self._machines = machines

    def start(
        self, machine: str, run_id: str, payload: dict[str, Any], *, generation: int = 0, redelivery: bool = False
    ) -> str:
        # Executions are always named (idempotent per run + purpose + generation); '/' is not allowed in names.
        # Generation n > 0 is the n-th continuation of a long run (continue-as-new): suffix ``-g<n>``, kept whole.
        # A redelivery (the durability hook's second delivery of the same work) adds ``-r``.
        suffix = (f"-g{generation}" if generation else "") + ("-r" if redelivery else "")
        name = (run_id.replace("/", "--") + "-" + machine)[: 80 - len(suffix)] + suffix
        try:
            resp = self._c.start_execution(
                stateMachineArn=self._machines[machine], name=name, input=json.dumps(payload)
            )
            return str(resp["executionArn"])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ExecutionAlreadyExists":
                arn = self._machines[machine].replace(":stateMachine:", ":execution:") + ":" + name
                return arn
            raise

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
