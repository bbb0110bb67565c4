"""The engine version: what a run's stored state and event log mean, and which builds may advance a run.

Every run records, at creation, the build that started it and this engine version (``data.build``: written by the
run-start service, ``shared.services.run_start.stamped``). Builds cross under running runs: a deploy
moves the functions' alias (a canary first), so the next task of a run started on build N may run on build N+1.
That is safe while both builds have the same ``ENGINE_VERSION``: a task folds the stored log and state from the
stored sequence and appends idempotently, whatever build wrote them. A build whose engine version differs from
the run's refuses to advance it (:class:`EngineVersionMismatchError`); Step Functions retries the task for as long
as a traffic shift lasts (statemachines/*.asl.json), so a run lands on a build of its own engine version, and a
run whose engine is gone for good (a rollback, or a finished shift to a new engine) fails after the retries with
``node_execution_failed``. Raise ``ENGINE_VERSION`` only with a change to what the log or the state means, and
list the versions a build still reads in ``READS`` when it can continue them.

The stamp's engine version (``STAMPED``) may be ahead of the log's: it also says how a run's executions are driven.
A run stamped 2 executes on the chained machines (decision 0191: an execution is one task, and a task that goes on
starts the next execution); a build of version 1 would answer ``continue`` to a machine that no longer loops and its
execution would end with the run unfinished, so it refuses the run, and the run's task waits for this build.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ENGINE_VERSION = 1  # what the log means: every run.started carries it
# The engine version a run is stamped with: 2, its executions are chained (decision 0191).
STAMPED = 2
# Engine versions whose runs this build may advance: 1, a run of the looping machines a build before 0191 started.
READS = frozenset({ENGINE_VERSION, STAMPED})
# How a run's tasks append, in its build stamp (``appends``): 2, their middle pages plainly past an open tail
# (decision 0170). A run stamped before has no ``appends``: its tasks append in transactions only. Not an engine
# version: the log means what it meant (an engine version is in every run.started, and a replay compares it).
APPENDS = 2
BUILD_KEY = "build"  # the run's creation facts: data["build"] = {"buildId": ..., "engineVersion": ...}


class EngineVersionMismatchError(Exception):
    """This build's engine does not read the run's engine version. The task fails with this error name, which the
    state machines retry (then catch: the run fails)."""


def build_stamp(build_id: str) -> dict[str, Any]:
    """What a run records about the build that started it."""
    return {"buildId": build_id, "engineVersion": STAMPED, "appends": APPENDS}


def plain_appends(data: Mapping[str, Any]) -> bool:
    """Whether a run's tasks may append their middle pages plainly (stamped by a build that does, decision 0170)."""
    return int((data.get(BUILD_KEY) or {}).get("appends", 1)) >= APPENDS


def run_engine_version(data: Mapping[str, Any]) -> int:
    """The engine version a run was started on; runs created before builds were recorded are version 1."""
    return int((data.get(BUILD_KEY) or {}).get("engineVersion", 1))


def check_engine(data: Mapping[str, Any]) -> None:
    """Raise :class:`EngineVersionMismatchError` unless this build may advance a run with creation facts ``data``."""
    version = run_engine_version(data)
    if version not in READS:
        raise EngineVersionMismatchError(
            f"the run was started on engine version {version}; this build reads {sorted(READS)}"
        )
