"""Executing an eval run: Prepare, one trial (one agent invocation under its fixture plan), Finish.

The eval state machine (statemachines/eval-run.asl.json) calls:
- ``prepare``: emits ``run.started`` and ``eval.started`` and writes the task x trial items (small keys only) as a
  JSON array to S3 under the run (``items_key``), which the Distributed Map's ItemReader reads;
- ``trial_task`` per item (a Distributed Map, concurrency from ``EVAL_MAX_CONCURRENCY``): ``run_trial`` then stores the trial's event drafts
  and grade in a ``TRIAL#`` aux item of the run. Idempotent: a stored trial is not run again, and each tool
  call is write-once by call key, so a retried trial never re-fires an effect;
- ``finish``, in pages of whole tasks (a Step Functions loop; a page up to ``EVAL_FINISH_PAGE_TRIALS`` task-trials):
  appends the trials' events in suite order with one ``eval.scored`` per task; the last page appends
  ``eval.completed`` and ``run.completed`` (outputs = the EvalSummary), stores the summary on the run item (or
  under the run in S3 when large) and completes the run. Idempotent: a page skips what the run's ``lastSeq``
  shows is already appended.

The plan of an eval run (its ``EVALPLAN`` aux item, written at create) pins the suite, the agent, the modes,
the baseline's scores, and the S3 keys of derived (RFC 0252) fixture copies. Large data travels by these keys,
never inside the Step Functions payload.

Here the three tasks; below them, one trial (``evaltrial``), which answers its calls are served (``evalsources``) and
what a Finish page appends (``evalpages``). The services read the plan, the sources and the stored trials through
this module (``load_plan``, ``source_entries``, ``load_trials``, ...: re-exported).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shared import keys
from shared.caches import LockedLRUCache
from shared.engine import externaltrial, grading, spans
from shared.engine.evalpages import (
    append_chunked,
    closing_drafts,
    earlier_rows,
    page_end,
    rows_key,
    summary_updates,
    task_drafts,
)
from shared.engine.evalplan import PLAN_VERSION as PLAN_VERSION
from shared.engine.evalplan import _plan_cache as _plan_cache
from shared.engine.evalplan import load_plan as load_plan
from shared.engine.evalplan import store_plan as store_plan
from shared.engine.evalsources import SOURCES_LINKED as SOURCES_LINKED
from shared.engine.evalsources import derived_entries as derived_entries
from shared.engine.evalsources import entries_from_records as entries_from_records
from shared.engine.evalsources import source_entries as source_entries
from shared.engine.evaltrial import HOLD_MS, TrialWrites, run_trial, store_trial, trial_sk
from shared.engine.evaltrial import call_keys_between as call_keys_between
from shared.engine.evaltrial import invocation_id as invocation_id
from shared.engine.evaltrial import load_trials as load_trials
from shared.engine.kernel import ENGINE_VERSION, EngineError, fail_run, make_event, resolve_agent
from shared.engine.tools import ToolRuntime, ToolTally
from shared.errors import ConflictError, EvalRecordedFixturesGoneError, RunGoneError
from shared.ports import WRITABLE, Ports, RunRecord
from shared.protocol import codes as c

PREPARED_EVENTS = 2  # run.started, eval.started


# --------------------------------------------------------------------------- Prepare


def items(plan: dict[str, Any], run_id: str) -> list[dict[str, Any]]:
    suite = plan["suite"]
    return [
        {"r": run_id, "t": i, "k": k}
        for i, task in enumerate(suite["tasks"])
        for k in range(1, grading.task_trials(suite, task) + 1)
    ]


def head_payloads(rec: RunRecord, plan: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The payloads of an eval run's first two events: ``run.started`` and ``eval.started``."""
    d = rec.data
    started: dict[str, Any] = {
        "workflowId": d["workflowId"],
        "transport": "rest",
        "engineVersion": ENGINE_VERSION,
        "owner": d["owner"],
    }
    for k in ("tags", "metadata"):
        if d.get(k) is not None:
            started[k] = d[k]
    suite = plan["suite"]
    ev_started: dict[str, Any] = {
        "suiteId": suite["suiteId"],
        "suiteVersion": suite["version"],
        "taskCount": len(suite["tasks"]),
        "modes": list(plan["modes"]),
    }
    if plan.get("baselineRunId"):
        ev_started["baselineRunId"] = plan["baselineRunId"]
    if plan.get("fixtureRuns"):
        ev_started["fixtureRuns"] = plan["fixtureRuns"]
    return started, ev_started


def items_key(run_id: str) -> str:
    """The S3 object (a JSON array) the eval Map's ItemReader reads: under the run, so erasure removes it."""
    return f"{keys.run_prefix(run_id)}eval-items.json"


def batch_size(count: int, waiting: bool, max_concurrency: int, most: int) -> int:
    """Trials per child execution of the Map (its ItemBatcher): one for a trial that waits for its driver (each
    waits on its own task token); else the trials each of ``max_concurrency`` concurrent children runs, split into
    as few batches of at most ``most`` as hold them, evenly (a child runs its trials one after another, so trials in
    flight stay at most ``max_concurrency`` and the eval takes the wall time it took one trial a child)."""
    if waiting:
        return 1
    per_slot = -(-count // max(1, max_concurrency))
    batches_per_slot = -(-per_slot // max(1, most))
    return max(1, -(-per_slot // max(1, batches_per_slot)))


def _listed(ports: Ports, plan: dict[str, Any], rec: RunRecord) -> dict[str, Any]:
    """Write the trial items for the Distributed Map's ItemReader (no 256 KB state payload limit)."""
    run_id = rec.run_id
    agent = resolve_agent(ports, rec.tenant, str(plan["agentId"]), plan.get("agentVersion"))
    listed = externaltrial.harness_items(ports, agent, items(plan, run_id))
    ports.blobs.put_json(items_key(run_id), listed)
    waiting = any("x" in item for item in listed)
    settings = ports.settings
    batch = batch_size(len(listed), waiting, settings.eval_max_concurrency, settings.eval_trials_per_batch)
    return {"runId": run_id, "count": len(listed), "itemsKey": items_key(run_id), "batch": batch}


def prepare(ports: Ports, run_id: str) -> dict[str, Any]:
    """Emit run.started and eval.started (once) and write the list of trials to run (``count`` of them)."""
    none = {"runId": run_id, "count": 0, "itemsKey": "", "batch": 1}
    for _ in range(3):
        rec = ports.runs.get_run(run_id)
        if rec is None or rec.status not in WRITABLE:
            return none
        plan = load_plan(ports, run_id)
        if rec.last_seq + 1 >= PREPARED_EVENTS:
            return _listed(ports, plan, rec)
        started, ev_started = head_payloads(rec, plan)
        evs = [
            make_event(ports, run_id, 0, c.RUN_STARTED, started, None),
            make_event(ports, run_id, 1, c.EVAL_STARTED, ev_started, None),
        ][rec.last_seq + 1 :]
        try:
            ports.events.append_events(
                run_id,
                rec.last_seq + 1,
                evs,
                run_updates={"status": "running", "startedAt": evs[0]["timestamp"]},
                require_status=WRITABLE,
                expires_at=rec.expires_at,
            )
        except RunGoneError:
            return none
        except ConflictError:
            continue
        return _listed(ports, plan, rec)  # appended: the run is started (no second read)
    raise EngineError("could not start the eval run")


# --------------------------------------------------------------------------- a trial (a Map iteration)


_runs: LockedLRUCache[str, RunRecord] = LockedLRUCache(
    maxsize=16
)  # eval run id -> its record as first read in this container


def _eval_record(ports: Ports, run_id: str) -> RunRecord | None:
    """The eval run as a trial needs it (tenant, expiry, configuration: fixed at create), read once per container;
    whether it is still writable is checked by the trial's write, not by a read."""
    rec = _runs.get(run_id)
    if rec is not None:
        return rec
    rec = ports.runs.get_run(run_id)
    if rec is None or rec.status not in WRITABLE:
        return None
    _runs[run_id] = rec
    return rec


def trial_task(
    ports: Ports,
    item: dict[str, Any],
    *,
    tally: ToolTally | None = None,
    issue: externaltrial.Issue | None = None,
    held: TrialWrites | None = None,
) -> dict[str, Any]:
    """One Map iteration. Idempotent without a read of its own: a retried trial re-runs, every call that claimed an
    effect returns its recorded outcome (write-once by call key), the others are decided again equal, and the
    TRIAL# item is rewritten with them. A warm container reads the run once for all its trials. ``held``: its
    batch's held writes, which its own join (``TrialWrites``)."""
    run_id, task_index, trial = str(item["r"]), int(item["t"]), int(item["k"])
    rec = _eval_record(ports, run_id)
    if rec is None:
        return {"ok": True}  # cancelled or erased: nothing to do
    attrs = {**spans.run_attributes(rec), "openwop.eval.task_index": task_index, "openwop.eval.trial": trial}
    try:
        # the trial's span joins the eval run's trace; its model and tool calls are its children
        with ports.tracing.span(spans.TRIAL_SPAN, attrs, parent=spans.trace_parent(rec)):
            plan = load_plan(ports, run_id)
            tools = ToolRuntime(
                ports,
                run_id,
                rec.tenant,
                "live",
                rec.expires_at,
                int(ports.settings.run_tool_call_budget),
                tally=tally,
                deferred=[],
            )
            agent = resolve_agent(ports, rec.tenant, str(plan["agentId"]), plan.get("agentVersion"))
            if agent is not None and agent.external:
                if issue is None:
                    raise EngineError("an external agent's trial needs the gateway's tokens")
                result = externaltrial.endpoint_trial(ports, rec, plan, task_index, trial, agent, issue)
            else:
                result = run_trial(ports, rec, task_index, trial, tools, plan=plan, agent=agent)
            store_trial(ports, rec, result, tools.deferred, held)
    except (RunGoneError, ConflictError):  # cancelled, finished or erased meanwhile: the trial writes nothing
        _runs.pop(run_id, None)
        return {"ok": True}
    except EvalRecordedFixturesGoneError:
        # A Distributed Map reports a failed iteration to its parent only as a tolerated-failure threshold
        # exceeded, so the trial fails the run with the RFC 0252 code itself, then fails as before.
        fail_run(ports, run_id, {"Error": "EvalRecordedFixturesGoneError"})
        raise
    return {"ok": True}


class EvalTrialBatchUnfinished(Exception):  # noqa: N818 (the error name the Trial state's Retry matches)
    """A batch's invocation stopped before a trial it had no time left for; the retry runs the rest."""


BATCH_RESERVE_MS = 10_000  # time a batch's invocation keeps beyond its longest trial so far before the next


def trials_task(
    ports: Ports,
    batch: list[dict[str, Any]],
    *,
    retry: int,
    time_left: Callable[[], int],
    tally: ToolTally | None = None,
    issue: externaltrial.Issue | None = None,
) -> dict[str, Any]:
    """A child execution's batch of trials (the Map's ItemBatcher), one after another. Before a trial the
    invocation has less time left for than its longest so far (and a reserve), it stops with
    ``EvalTrialBatchUnfinished``; the state's retry (``retry`` > 0) skips the trials already stored, so every
    invocation makes progress and no stored trial runs again."""
    if not batch:
        return {"ok": True}
    run_id = str(batch[0]["r"])
    done = stored_trials(ports, run_id, batch) if retry else set()
    rec = _eval_record(ports, run_id)
    if rec is None:
        return {"ok": True}  # cancelled or erased: nothing to do
    held = TrialWrites(ports, rec)  # the trials' writes, together (decision 0187)
    longest, ran = 0, 0
    try:
        for item in batch:
            if (int(item["t"]), int(item["k"])) in done:
                continue
            if _eval_record(ports, run_id) is None:
                break  # cancelled or erased: nothing left to do
            before = time_left()
            if ran and before < longest + BATCH_RESERVE_MS:
                _flush(held)
                raise EvalTrialBatchUnfinished(f"{ran} trials ran; the rest of the {len(batch)} in a retry")
            if longest >= HOLD_MS:  # trials this slow are written one by one: none waits out the next
                _flush(held)
            trial_task(ports, item, tally=tally, issue=issue, held=held)
            longest, ran = max(longest, before - time_left()), ran + 1
    except EvalTrialBatchUnfinished:
        raise
    except Exception:
        _flush(held)  # the trials that ended before a failure are kept: its retry runs only the rest
        raise
    _flush(held)
    return {"ok": True}


def _flush(held: TrialWrites) -> None:
    """Write the batch's held trials; a run no longer writable (cancelled, finished or erased) keeps none."""
    try:
        held.flush()
    except (RunGoneError, ConflictError):
        _runs.pop(held.rec.run_id, None)


def stored_trials(ports: Ports, run_id: str, batch: list[dict[str, Any]]) -> set[tuple[int, int]]:
    """(task index, trial) of the batch's trials already stored: one Query of the range of their tasks."""
    tasks = [int(item["t"]) for item in batch]
    low, high = trial_sk(min(tasks), 0), f"{trial_sk(max(tasks), 0)[:-3]}~"
    out: set[tuple[int, int]] = set()
    for sk, _doc in ports.runs.query_aux(run_id, keys.TRIAL_PREFIX, between=(low, high)):
        _, task, trial = sk.rsplit("#", 2)
        out.add((int(task), int(trial)))
    return out


def agent_task(ports: Ports, item: dict[str, Any], phase: str, task_token: str = "") -> dict[str, Any]:
    """The states of a trial an external agent's driver runs (decision 0143): ``wait`` opens it for the driver
    (the Map item waits on ``task_token``), ``score`` grades what the gateway recorded and stores the trial."""
    run_id, task_index, trial = str(item["r"]), int(item["t"]), int(item["k"])
    rec = _eval_record(ports, run_id)
    if rec is None:
        return {"ok": True}
    try:
        plan = load_plan(ports, run_id)
        agent = resolve_agent(ports, rec.tenant, str(plan["agentId"]), plan.get("agentVersion"))
        if agent is None:
            raise EngineError("the eval's agent is gone")
        if phase == "wait":
            externaltrial.wait_task(ports, rec, plan, task_index, trial, task_token)
        else:
            store_trial(ports, rec, externaltrial.close_trial(ports, rec, plan, task_index, trial, agent))
    except (RunGoneError, ConflictError):
        _runs.pop(run_id, None)
    return {"ok": True}


# --------------------------------------------------------------------------- Finish pages


def finish(ports: Ports, run_id: str, cursor: dict[str, Any] | None = None) -> dict[str, Any]:
    """Append one page of tasks' events in suite order (``cursor``: the page's first task and first sequence; none
    for the first page); a page other than the last stores its tasks' summary rows under the run and answers
    ``more`` with the next cursor; the last page grades, stores the summary and completes the run. Idempotent: a
    page skips what the run's ``lastSeq`` shows it already appended."""
    start = int((cursor or {}).get("task", 0))
    page_trials = int(ports.settings.eval_finish_page_trials)
    first_seq = int((cursor or {}).get("seq", PREPARED_EVENTS))
    done: dict[str, Any] = {"runId": run_id, "more": False, "cursor": {}}
    for _ in range(5):
        rec = ports.runs.get_run(run_id)
        if rec is None or rec.status not in WRITABLE:
            return done
        try:
            plan = load_plan(ports, run_id)
            end = page_end(plan, start, page_trials)
            now = ports.clock.iso()
            drafts, rows = task_drafts(plan, load_trials(ports, run_id, (start, end)), start, end, now)
            last_page = end >= len(plan["suite"]["tasks"])
            updates: dict[str, Any] | None = None
            if last_page:
                earlier = earlier_rows(ports, run_id, start) if start else []
                closing, summ = closing_drafts(plan, earlier + rows, now, ports.ids.seeded)
                drafts += closing
                updates = {"status": "completed", **summary_updates(ports, run_id, summ)}
            else:
                ports.blobs.put_json(rows_key(run_id, start), rows)
            already = rec.last_seq + 1 - first_seq
            if already < 0:
                raise EngineError("the eval run's earlier events are not appended")
            _append(ports, rec, drafts[already:], updates)
        except RunGoneError:
            return done
        except ConflictError:
            continue
        if last_page:
            return done
        return {"runId": run_id, "more": True, "cursor": {"task": end, "seq": first_seq + len(drafts)}}
    raise EngineError("could not finish the eval run")


def _append(ports: Ports, rec: RunRecord, drafts: list[dict[str, Any]], updates: dict[str, Any] | None) -> None:
    """Append the drafts as events after the run's last one (``append_chunked``)."""
    seq = rec.last_seq + 1
    events = []
    for d in drafts:
        ev = make_event(ports, rec.run_id, seq, d["type"], d["payload"], None)
        ev["timestamp"] = d["timestamp"]
        events.append(ev)
        seq += 1
    append_chunked(ports, rec, events, updates)
