"""Orchestration of run executions and the effect guard."""

from __future__ import annotations

from typing import Any, Protocol


class Orchestrator(Protocol):
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
        """Start (once: executions are named) an execution of ``machine`` for ``run_id``; its ARN. ``redelivery``:
        a second execution of the same generation (the durability hook's duplicate delivery, never the engine).
        ``machine_arn``: the machine as its own execution names it (a run task continuing its run), used where given.
        ``purpose``: named for it instead of the machine (an execution that is not the run's own: its late writes')."""
        ...

    def execution_name(self, machine: str, run_id: str) -> str:
        """The name of ``run_id``'s first execution of ``machine`` (generation 0, not a redelivery): what ``start``
        names it, and what its tasks are told (``$$.Execution.Name``)."""
        ...

    def execution_arn(self, machine: str, run_id: str) -> str | None:
        """The ARN ``start`` gives ``run_id``'s first execution of ``machine`` (its name under the machine's ARN), known
        before it starts, so a create stores it with the run (decision 0175); None where this process has no ARN of
        ``machine``."""
        ...

    def can_start(self, machine: str) -> bool:
        """Whether this process may start ``machine``'s executions (a function is given the machines it starts)."""
        ...

    def stop(self, execution_arn: str) -> None: ...
    def resume(self, task_token: str) -> None: ...


class ExecutionStartThrottledError(Exception):
    """Step Functions throttled a start past the SDK's own retries. A run task that continues its run (decision 0191)
    fails with this error name, which the state machines retry as they ride out Lambda's throttling."""


class EffectDeniedError(Exception):
    """An effect seam refused an effect (default-deny in replay)."""


class EffectGuard(Protocol):
    def check(self, seam: str) -> None: ...
