"""Executions' names and the stamps Advance tasks leave on a run item (decision 0173).

A task's last write names it on the run item (``TASK_STAMP``: ``task_stamp`` of its execution's name and its place
in it); a run's create names the task before its first execution's first. The next task expects its predecessor's
(``prior_stamp``) and keeps an eventually consistent read of its run that shows it. Here, and not in the kernel, so
a create computes its stamp without loading the engine.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["execution_generation", "prior_stamp", "task_stamp"]


def task_stamp(execution: str, hops: int) -> str:
    """The stamp an Advance task's last write leaves on the run item (``TASK_STAMP``): 64 bits of a digest of its
    execution's name and its place in it (``hops``), so no other task of the run, in this execution or another,
    leaves the same."""
    return hashlib.blake2b(f"{execution}#{hops}".encode(), digest_size=8).hexdigest()


def prior_stamp(execution: str, hops: int) -> str | None:
    """The stamp of the write the task at ``hops`` of ``execution`` expects last on its run: its predecessor's, or
    for the first task of a run's first execution its create's (``task_stamp(execution, -1)``); None (no such write:
    a continued execution's first task) reads consistently."""
    if not execution or (hops == 0 and execution_generation(execution) > 0):
        return None
    return task_stamp(execution, hops - 1)


def execution_generation(execution_name: str) -> int:
    """The generation of an execution from its name (``...-g<n>``, a redelivery's ``-r`` after it; none: 0)."""
    m = re.search(r"-g(\d+)(?:-r)?$", execution_name or "")
    return int(m.group(1)) if m else 0
