"""What an Advance task is handed instead of reading its run: the run as the write before it stored it.

Two writers hand it on. A task that goes on (``continue``) keeps the run as its last write stored it in the warm
process, for the next task of its execution there (``keep_left``; decision 0177). A create puts the run as it stored
it, and the workflow it pinned, in its execution's input for that execution's first task (``first_input``; decision
0178). Either is taken only by the task whose predecessor's stamp it carries (``prior_stamp``), once, and never by a
retried task: what it may miss (a cancel, a pause, a signal since) fails that task's first append's conditions, as an
eventually consistent read of the run would (decision 0173).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from shared.caches import LockedLRUCache
from shared.ports import RunRecord

# Under this key a run kind's answer carries the run as the task's last write left it (popped by the kernel).
LEFT = "_left"
# What a create hands its first task, at most this large as JSON (an execution's input is at most 256 KB); the
# workflow is left out first, then the run, and the task reads what it is not handed.
FIRST_INPUT_BYTES = 32 * 1024

_left: LockedLRUCache[str, RunRecord] = LockedLRUCache(maxsize=8)


def keep_left(run_id: str, out: dict[str, Any]) -> None:
    """Keep the run a kind's answer carries (``LEFT``) for the next task, only when the run goes on at once: after
    a wait (a Wait state) a signal may have landed that moves no stamp, and a step that appends nothing would miss
    it."""
    left = out.pop(LEFT, None)
    if isinstance(left, RunRecord) and out.get("next") == "continue":
        _left[run_id] = left


def first_input(rec: RunRecord, workflow: dict[str, Any] | None) -> dict[str, Any] | None:
    """What a create puts in its execution's input for the first task: ``rec`` as stored (``RunStore.create_run``'s
    answer) and the workflow it pinned; None when even the run alone is larger than ``FIRST_INPUT_BYTES``."""
    run = dataclasses.asdict(rec)
    if workflow is not None:
        doc: dict[str, Any] = {"run": run, "workflow": workflow}
        if len(json.dumps(doc)) <= FIRST_INPUT_BYTES:
            return doc
    doc = {"run": run}
    return doc if len(json.dumps(doc)) <= FIRST_INPUT_BYTES else None


def take(run_id: str, prior: str | None, given: Any = None) -> tuple[RunRecord | None, dict[str, Any] | None]:
    """The run handed to the task whose predecessor's stamp is ``prior`` (the warm process's, else ``given``: the
    execution's input's ``first_input``), and the workflow handed with it; (None, None): read it."""
    kept = _left.pop(run_id, None)
    if prior is None:
        return None, None
    if kept is not None and kept.task_stamp == prior:
        return kept, None
    if not isinstance(given, dict) or not isinstance(given.get("run"), dict):
        return None, None
    try:
        rec = RunRecord(**given["run"])
    except TypeError:  # not a record this build knows
        return None, None
    if rec.run_id != run_id or rec.task_stamp != prior:
        return None, None
    workflow = given.get("workflow")
    return rec, workflow if isinstance(workflow, dict) else None
