"""The run kinds ``kernel.advance`` hands a run to, keyed by ``kernel.run_kind``: the map its callers (the Advance
task's handler) pass in, so the kernel imports no kind and no caller imports a kind only for its side effect.

A new run kind is its module and one entry here (docs/decisions/0094-engine-kernel-and-run-kinds.md). The eval fork
kind is imported on its first run, so an Advance task of a workflow run loads no eval module (as before the map).
"""

from __future__ import annotations

from typing import Any

from shared.engine import workflowrun
from shared.engine.kernel import RunKinds
from shared.ports import Ports, RunRecord


def eval_fork(ports: Ports, rec: RunRecord, **task: Any) -> dict[str, Any]:
    """A fork of an eval run: ``evalfork.advance`` (the task's budget and stamp as ``kernel.RunKind`` passes them)."""
    from shared.engine import evalfork

    return evalfork.advance(ports, rec, **task)


RUN_KINDS: RunKinds = {
    "workflow": workflowrun.advance,  # a workflow run, its replays and branches: the step loop
    "eval-fork": eval_fork,  # a fork of an eval run: its trials re-run, a page of tasks per task
}
