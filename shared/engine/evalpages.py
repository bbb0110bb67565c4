"""An eval run's pages of whole tasks, as its Finish pages and an eval fork's pages append them: where a page ends
(``page_end``), its tasks' events in suite order with one ``eval.scored`` per task and their summary rows
(``task_drafts``), the closing events and the summary (``closing_drafts``), the rows earlier pages stored under the
run (``rows_key``, ``earlier_rows``), the stored summary (``summary_updates``) and the chunked append
(``append_chunked``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from shared import keys
from shared.engine import evalstats, grading
from shared.engine.kernel import EngineError
from shared.errors import RunGoneError
from shared.ports import WRITABLE, Draws, Ports, RunRecord
from shared.protocol import codes as c

CHUNK_EVENTS = 99
CHUNK_BYTES = 3_000_000  # TransactWriteItems carries at most 4 MB
SUMMARY_INLINE_LIMIT = 100_000  # bytes of EvalSummary JSON kept on the run item; larger goes to S3 under the run


def page_end(plan: dict[str, Any], start: int, page_trials: int) -> int:
    """The end (exclusive) of the Finish page of tasks that starts at ``start``: whole tasks, at least one, up to
    ``page_trials`` task-trials (``EVAL_FINISH_PAGE_TRIALS``; a suite of at most that many takes one page)."""
    suite = plan["suite"]
    tasks = suite["tasks"]
    end, trials = start, 0
    while end < len(tasks):
        n = grading.task_trials(suite, tasks[end])
        if end > start and trials + n > page_trials:
            break
        trials += n
        end += 1
    return end


def task_drafts(
    plan: dict[str, Any], trials: dict[tuple[int, int], dict[str, Any]], start: int, end: int, now: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The events of tasks ``start <= index < end`` in suite order (each trial's, then the task's
    ``eval.scored``) and the tasks' summary rows (pure)."""
    suite = plan["suite"]
    drafts: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for i in range(start, end):
        task = suite["tasks"][i]
        task_id = str(task["taskId"])
        done = []
        for k in range(1, grading.task_trials(suite, task) + 1):
            tr = trials.get((i, k))
            if tr is None:
                raise EngineError(f"trial {i}/{k} has no stored result")
            drafts.extend(tr["events"])
            done.append(tr)
        row = grading.task_result(task_id, done)
        rows.append(row)
        drafts.append(
            {
                "type": c.EVAL_SCORED,
                "timestamp": now,
                "payload": {
                    "taskId": task_id,
                    "score": row["score"],
                    "passed": row["passed"],
                    "fixtureMissCount": row["fixtureMissCount"],
                },
            }
        )
    return drafts, rows


def closing_drafts(
    plan: dict[str, Any], rows: list[dict[str, Any]], now: str, seeded: Callable[[str], Draws] | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``eval.completed`` and ``run.completed`` and the summary, from every task's row (pure; ``seeded``, the
    IdSource's seeded generator, draws the bootstrap of a regression's delta)."""
    baseline = plan.get("baseline") if "regression" in (plan.get("modes") or []) else None
    draws = seeded(evalstats.seed(plan["suite"], str(baseline["runId"]))) if baseline and seeded else None
    summ = grading.summary(plan["suite"], rows, baseline, draws)
    completed: dict[str, Any] = {
        "aggregateScore": summ["aggregateScore"],
        "passed": summ["passed"],
        "taskCount": summ["taskCount"],
        "passedCount": summ["passedCount"],
    }
    if "regression" in summ:
        completed["regressionVsBaseline"] = summ["regression"]["scoreDelta"]
    return [
        {"type": c.EVAL_COMPLETED, "payload": completed, "timestamp": now},
        {"type": c.RUN_COMPLETED, "payload": {"outputs": summ}, "timestamp": now},
    ], summ


def finish_drafts(
    plan: dict[str, Any], trials: dict[tuple[int, int], dict[str, Any]], now: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every event after eval.started, in suite order, and the summary (pure)."""
    drafts, rows = task_drafts(plan, trials, 0, len(plan["suite"]["tasks"]), now)
    closing, summ = closing_drafts(plan, rows, now)
    return drafts + closing, summ


def summary_updates(ports: Ports, run_id: str, summ: dict[str, Any]) -> dict[str, Any]:
    """The run-item update that stores the summary: inline, or (a suite of thousands of tasks) an S3 object under
    the run named by ``{"$ref": key}`` (read back with ``shared.services.summaries.stored``)."""
    if len(json.dumps(summ, separators=(",", ":"))) <= SUMMARY_INLINE_LIMIT:
        return {"summary": summ}
    key = keys.eval_summary_key(run_id)
    ports.blobs.put_json(key, summ)
    return {"summary": {"$ref": key}}


def rows_key(run_id: str, start: int) -> str:
    return f"{keys.run_prefix(run_id)}eval-rows/{start:05d}.json"


def earlier_rows(ports: Ports, run_id: str, upto: int) -> list[dict[str, Any]]:
    """The summary rows the pages before task ``upto`` stored, in suite order (a page's object holds one row per
    task, so the next page starts where its rows end, whatever the page size was)."""
    rows: list[dict[str, Any]] = []
    while len(rows) < upto:
        got = ports.blobs.get_json(rows_key(run_id, len(rows)))
        if not got:
            raise RunGoneError(run_id)
        rows.extend(got)
    return rows


def _chunks(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    out: list[list[dict[str, Any]]] = [[]]
    size = 0
    for ev in events:
        n = len(json.dumps(ev, separators=(",", ":")))
        if out[-1] and (len(out[-1]) >= CHUNK_EVENTS or size + n > CHUNK_BYTES):
            out.append([])
            size = 0
        out[-1].append(ev)
        size += n
    return out


def append_chunked(ports: Ports, rec: RunRecord, events: list[dict[str, Any]], updates: dict[str, Any] | None) -> None:
    """Append ``events`` (numbered from the run's last one) in transactions of at most ``CHUNK_EVENTS`` events and
    ``CHUNK_BYTES``; the last carries ``updates``, and when they end the run, ``completedAt``: its last event's
    time (or the updates' own when there is no event). No event: ``updates`` alone (none: nothing is written)."""
    if not events:
        if updates:
            ports.events.append_events(
                rec.run_id,
                rec.last_seq + 1,
                [],
                run_updates=updates,
                require_status=WRITABLE,
                expires_at=rec.expires_at,
            )
        return
    if updates and updates.get("status") in c.TERMINAL_STATUSES:
        updates = {**updates, "completedAt": events[-1]["timestamp"]}
    nxt = rec.last_seq + 1
    chunks = _chunks(events)
    for ci, chunk in enumerate(chunks):
        ports.events.append_events(
            rec.run_id,
            nxt,
            chunk,
            run_updates=updates if ci == len(chunks) - 1 else None,
            require_status=WRITABLE,
            expires_at=rec.expires_at,
        )
        nxt += len(chunk)
