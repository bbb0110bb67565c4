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
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cachetools import LRUCache

from shared import keys
from shared.engine import evalstats, grading, judge, scorers, spans, toolscorer
from shared.engine.agents import invocation_step, started_payload
from shared.engine.evalplan import INLINE_LIMIT as INLINE_LIMIT
from shared.engine.evalplan import PLAN_VERSION as PLAN_VERSION
from shared.engine.evalplan import _plan_cache as _plan_cache
from shared.engine.evalplan import load_plan as load_plan
from shared.engine.evalplan import store_plan as store_plan
from shared.engine.kernel import ENGINE_VERSION, EngineError, fail_run, make_event, resolve_agent
from shared.engine.matching import rules_for
from shared.engine.model_agent import ModelSession, usage_payload
from shared.engine.tools import LIVE_READ_ONLY, FixturePlan, ToolRuntime, ToolTally
from shared.errors import ConflictError, EvalRecordedFixturesGoneError, RunGoneError
from shared.ports import WRITABLE, Draws, Ports, RunRecord, ToolCallRecord
from shared.protocol import codes as c

PREPARED_EVENTS = 2  # run.started, eval.started
CHUNK_EVENTS = 99
CHUNK_BYTES = 3_000_000  # TransactWriteItems carries at most 4 MB
# On a plan: the suite's sources were linked under the eval run at create (a source erased before is tombstoned in the
# plan), so a trial reads its source without a link of its own (docs/decisions/0121-from-runs-at-ten-thousand.md).
SOURCES_LINKED = "sourcesLinked"
SUMMARY_INLINE_LIMIT = 100_000  # bytes of EvalSummary JSON kept on the run item; larger goes to S3 under the run


def invocation_id(task_id: str, trial: int) -> str:
    return f"{task_id}:{trial}"


def order_key(task_index: int, trial: int) -> str:
    """Call keys ``T<task>-<trial>#<index>`` sort in event order (suite order, then trial, then call)."""
    return f"T{task_index:05d}-{trial:03d}"


def call_keys_between(start: int, end: int) -> tuple[str, str]:
    """The (low, high) call keys of tasks ``start <= index < end``, trials and judge calls included."""
    return f"T{start:05d}-", f"T{end - 1:05d}-~"


def trial_sk(task_index: int, trial: int) -> str:
    return f"{keys.TRIAL_PREFIX}{task_index:05d}#{trial:03d}"


# --------------------------------------------------------------------------- derivation (RFC 0252 §D)


def entries_from_records(records: list[ToolCallRecord], agent_id: str) -> list[dict[str, Any]]:
    """Fixture entries from the as-executed record: the agent's own calls (delegates excluded), every
    invocation, in call-key (= event) order; one entry per call. A call that failed or never ran
    (``forbidden``, ``rate_limited``) yields ``isError`` with its error as the response."""
    out: list[dict[str, Any]] = []
    for r in sorted(records, key=lambda r: r.call_key):
        if r.agent_id != agent_id or r.delegate:
            continue
        entry: dict[str, Any] = {"tool": r.tool_name, "args": r.args, "argsMatch": "exact"}
        if r.status == "ok":
            entry["response"] = r.result
        else:
            entry["isError"] = True
            entry["response"] = r.error or {"code": c.EXTERNAL_CALL_FAILED, "message": "the call failed"}
        out.append(entry)
    return out


def derived_entries(ports: Ports, plan: dict[str, Any], task_id: str) -> list[dict[str, Any]] | None:
    """The stored derived copy for a task named in ``fixtureRuns`` (never derived again)."""
    key = (plan.get("derived") or {}).get(task_id)
    if key is None:
        return None
    copy = ports.blobs.get_json(str(key))
    if copy is None:
        raise EvalRecordedFixturesGoneError()
    return list(copy["entries"])


def source_entries(
    ports: Ports, plan: dict[str, Any], task: dict[str, Any], tenant: str, served: RunRecord | None = None
) -> list[dict[str, Any]]:
    """A task whose suite names its ``sourceRunId`` (checked when the suite was registered): the entries of the
    eval's agent, read from the source's as-executed record at each trial (the eval's pinned suite is the grant; no
    copy). A source of another tenant, or one being erased (its tombstone is written before its calls go), serves
    nothing: every call misses (fail-closed).

    ``served`` is the eval run a trial serves: before anything is read it is linked under the source (``CHILD#``,
    conditioned on the source's tombstone, one write), so the source's erasure erases the eval run that holds its
    answers (decision 0108); a source whose erasure began refuses the link and serves nothing."""
    source = str(task["sourceRunId"])
    if source.partition("/")[0] != tenant:
        return []
    # An eval created with its sources linked (SOURCES_LINKED): every served source was linked under it before the
    # plan was written, so a source whose erasure begins now erases this eval run with what it serves: one read.
    linked = served is not None and bool(plan.get(SOURCES_LINKED))
    if served is not None and not linked:
        try:
            ports.runs.put_aux(
                source, f"{keys.CHILD_PREFIX}{served.run_id}", {"runId": served.run_id}, served.expires_at
            )
        except RunGoneError:
            return []
    records = ports.tool_calls.list_calls(source)
    if not records or (not linked and ports.runs.is_tombstoned(source)):
        return []
    return entries_from_records(records, str(plan["agentId"]))


def fixture_plan(
    ports: Ports, plan: dict[str, Any], task: dict[str, Any], tenant: str = "", served: RunRecord | None = None
) -> FixturePlan | None:
    """Which plan a task gets (eval.md §5.1), matched under its ``fixtureMatching`` (else the suite's; none: exact):
    derived entries (``fixtureRuns``) under ``onMiss: "fail"``; else its ``sourceRunId``'s, under ``"fail"`` unless
    it says ``"live-read-only"``; else the suite's ``fixtures`` (default ``"fail"``); else live tools (``None``)."""
    rules = rules_for(plan["suite"], task)
    entries = derived_entries(ports, plan, str(task["taskId"]))
    if entries is not None:
        return FixturePlan(entries, "fail", rules=rules)
    fx = task.get("fixtures")
    if task.get("sourceRunId"):
        on_miss = LIVE_READ_ONLY if (fx or {}).get("onMiss") == LIVE_READ_ONLY else "fail"
        return FixturePlan(source_entries(ports, plan, task, tenant, served), on_miss, rules=rules)
    if "live-shadow" in (plan.get("modes") or []):
        return None
    if fx is not None:
        return FixturePlan(list(fx.get("toolResponses") or []), str(fx.get("onMiss", "fail")), rules=rules)
    return None


# --------------------------------------------------------------------------- one trial


@dataclass
class TrialResult:
    task_index: int
    trial: int
    task_id: str
    events: list[dict[str, Any]] = field(default_factory=list)  # drafts {type, payload, timestamp}
    decided: bool = False
    decision: Any = None
    calls: list[dict[str, Any]] = field(default_factory=list)  # {tool, args} as the agent attempted them
    fixture_miss_count: int = 0
    score: float = 0.0
    passed: bool = False
    error: dict[str, Any] | None = None  # the invocation failed (a model call, maxTurns, a replay miss, the judge)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    latency_ms: int = 0
    scorer: dict[str, Any] | None = None  # the scorer's {strategy, score, passed, reason, parts}: the report's

    def stored(self) -> dict[str, Any]:
        """What the TRIAL# item keeps: the drafts and the grade (no decision, no call content beyond events)."""
        doc: dict[str, Any] = {
            "taskIndex": self.task_index,
            "trial": self.trial,
            "taskId": self.task_id,
            "events": self.events,
            "score": self.score,
            "passed": self.passed,
            "fixtureMissCount": self.fixture_miss_count,
            "latencyMs": self.latency_ms,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
        }
        if self.cost_usd is not None:
            doc["costUsd"] = self.cost_usd
        if self.error is not None:
            doc["errorCode"] = self.error.get("code")
        if self.scorer is not None:
            doc["scorer"] = self.scorer
        return doc


def run_trial(
    ports: Ports,
    rec: RunRecord,
    task_index: int,
    trial: int,
    tools: ToolRuntime,
    *,
    plan: dict[str, Any] | None = None,
    models: ModelSession | None = None,
) -> TrialResult:
    """Run one invocation of the eval's agent on one task (trial ``trial``, 1-based) to completion and grade it.

    ``tools`` decides how calls are answered (live, or a replay fork's recorded calls); this function gives it
    a fresh fixture state for the task. Writes only the tool-call record (write-once per call key), so it can
    be re-run: calls already recorded return their recorded outcome and consume their fixture entry again.
    """
    plan = plan if plan is not None else load_plan(ports, rec.run_id)
    suite = plan["suite"]
    task = suite["tasks"][task_index]
    task_id = str(task["taskId"])
    if task.get("tombstoned"):
        # Its source run was erased with the task's input and answer: nothing to run; reported unverifiable.
        return TrialResult(
            task_index,
            trial,
            task_id,
            fixture_miss_count=1,
            error={"code": c.EVAL_RECORDED_FIXTURES_GONE, "message": "the task's source run is gone"},
        )
    agent = resolve_agent(ports, rec.tenant, str(plan["agentId"]), plan.get("agentVersion"))
    if agent is None:
        raise EngineError("the eval's agent is gone")
    fp = fixture_plan(ports, plan, task, rec.tenant, served=rec)
    tools.plan = fp.fresh() if fp is not None else None
    inv = invocation_id(task_id, trial)
    result = TrialResult(task_index, trial, task_id)
    overrides = (rec.data.get("configurable") or {}).get("ai")
    if models is None and agent.kind == "model":
        models = ModelSession(ports, rec.run_id, rec.tenant, "live", rec.expires_at, overrides, tally=tools.tally)
    result.events.append(
        {
            "type": c.AGENT_INVOCATION_STARTED,
            "payload": started_payload(agent, agent.agent_id, inv, "run-api", overrides),
            "timestamp": ports.clock.iso(),
        }
    )
    progress: dict[str, Any] = {
        "invocationId": inv,
        "order": order_key(task_index, trial),
        "calls": 0,
        "turns": 0,
        "history": [],
        "decided": False,
        "decision": None,
    }
    agent_input = task.get("input")
    for _ in range(int(tools.budget) + 2 * agent.max_turns + 3):
        step = invocation_step(agent, agent_input, progress, tools, int(progress["calls"]), models)
        ts = ports.clock.iso()
        for t, p in step.events:
            result.events.append({"type": t, "payload": p, "timestamp": ts})
            if t == c.AGENT_DECIDED:
                progress["decided"] = True
                progress["decision"] = p.get("decision")
            elif t == c.PROVIDER_USAGE:
                progress["turns"] += 1
                result.input_tokens += int(p.get("inputTokens", 0))
                result.output_tokens += int(p.get("outputTokens", 0))
                if p.get("costEstimateUsd") is not None:
                    result.cost_usd = (result.cost_usd or 0.0) + float(p["costEstimateUsd"])
        if step.outcome is not None and step.call is not None:
            out = step.outcome
            progress["calls"] += 1
            progress["history"].append({"status": out.status, "outcome": out.result, "error": out.error})
            result.calls.append({"tool": step.call[0], "args": step.call[1]})
            result.latency_ms += int(out.duration_ms or 0)
            if out.miss:
                result.fixture_miss_count += 1
        if step.finished:
            result.error = step.error
            break
    else:
        raise EngineError("the agent invocation did not finish")
    if models is not None and agent.kind == "model":
        # Recorded durations only (a replay serves them again), so a replayed summary equals its source's.
        result.latency_ms += sum(int(e.get("durationMs") or 0) for e in models.log(inv).values())
    result.decided = bool(progress["decided"]) and result.error is None
    result.decision = progress["decision"]
    met = None
    expected = task.get("expected") or {}
    rubric = judge.criteria(expected)  # a rubric task's criteria, or a golden task's judge matches
    answers: dict[str, scorers.Scored] = {}
    if rubric and result.decided and not result.fixture_miss_count:
        if models is None:
            models = ModelSession(ports, rec.run_id, rec.tenant, "live", rec.expires_at, overrides, tally=tools.tally)
        try:
            met, entry = judge.judge(
                models,
                dict(plan.get("judge") or {}),
                f"judge:{inv}",
                order_key(task_index, trial) + "J",
                agent_input,
                result.decision,
                rubric,
            )
            answers = judge.scored(expected, met) if expected.get("kind") == "golden" else {}
            result.events.append(
                {"type": c.PROVIDER_USAGE, "payload": usage_payload(entry), "timestamp": ports.clock.iso()}
            )
            if entry.get("costUsd") is not None:
                result.cost_usd = (result.cost_usd or 0.0) + float(entry["costUsd"])
        except (judge.ModelCallFailed, judge.JudgementError) as exc:
            result.error = {"code": exc.code, "message": exc.message}
    if expected.get("kind") == "golden" and result.decided and not result.fixture_miss_count:
        negotiated: list[dict[str, Any]] = []
        answers |= toolscorer.answers(
            tools,
            agent,
            f"score:{inv}",
            order_key(task_index, trial) + "S",
            dict(expected.get("match") or {}),
            agent_input,
            result.decision,
            result.calls,
            negotiated,
        )
        result.events += [
            {"type": c.NEGOTIATION_DECIDED, "payload": p, "timestamp": ports.clock.iso()} for p in negotiated
        ]
    pass_score = (suite.get("thresholds") or {}).get("passScore")
    g = grading.grade_trial(
        task,
        result.decided,
        result.decision,
        result.calls,
        result.fixture_miss_count,
        met=met,
        pass_score=None if pass_score is None else float(pass_score),
        facts=scorers.Facts(result.cost_usd, result.latency_ms, answers),
    )
    result.score, result.passed, result.scorer = g.score, g.passed, g.scorer
    return result


# --------------------------------------------------------------------------- the three tasks


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


def _listed(ports: Ports, plan: dict[str, Any], run_id: str) -> dict[str, Any]:
    """Write the trial items for the Distributed Map's ItemReader (no 256 KB state payload limit)."""
    listed = items(plan, run_id)
    ports.blobs.put_json(items_key(run_id), listed)
    return {"runId": run_id, "count": len(listed), "itemsKey": items_key(run_id)}


def prepare(ports: Ports, run_id: str) -> dict[str, Any]:
    """Emit run.started and eval.started (once) and write the list of trials to run (``count`` of them)."""
    none = {"runId": run_id, "count": 0, "itemsKey": ""}
    for _ in range(3):
        rec = ports.runs.get_run(run_id)
        if rec is None or rec.status not in WRITABLE:
            return none
        plan = load_plan(ports, run_id)
        if rec.last_seq + 1 >= PREPARED_EVENTS:
            return _listed(ports, plan, run_id)
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
        return _listed(ports, plan, run_id)  # appended: the run is started (no second read)
    raise EngineError("could not start the eval run")


def store_trial(ports: Ports, rec: RunRecord, result: TrialResult, calls: list[ToolCallRecord] | None = None) -> None:
    """Write the trial's TRIAL# item with the records of its calls that claimed no effect (``calls``), in one
    transaction while the run is writable (usually the trial's only write); ``ConflictError`` when it is not."""
    doc = result.stored()
    sk = trial_sk(result.task_index, result.trial)
    if len(json.dumps(doc, separators=(",", ":"))) > INLINE_LIMIT:
        key = f"{keys.run_prefix(rec.run_id)}trials/{result.task_index:05d}-{result.trial:03d}.json"
        ports.blobs.put_json(key, doc)
        doc = {"blob": key}
    ports.tool_calls.put_calls(rec.run_id, list(calls or []), rec.expires_at, aux=(sk, doc))


_runs: LRUCache[str, RunRecord] = LRUCache(maxsize=16)  # eval run id -> its record as first read in this container


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


def trial_task(ports: Ports, item: dict[str, Any], *, tally: ToolTally | None = None) -> dict[str, Any]:
    """One Map iteration. Idempotent without a read of its own: a retried trial re-runs, every call that claimed an
    effect returns its recorded outcome (write-once by call key), the others are decided again equal, and the
    TRIAL# item is rewritten with them. A warm container reads the run once for all its trials."""
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
            result = run_trial(ports, rec, task_index, trial, tools, plan=plan)
            store_trial(ports, rec, result, tools.deferred)
    except (RunGoneError, ConflictError):  # cancelled, finished or erased meanwhile: the trial writes nothing
        _runs.pop(run_id, None)
        return {"ok": True}
    except EvalRecordedFixturesGoneError:
        # A Distributed Map reports a failed iteration to its parent only as a tolerated-failure threshold
        # exceeded, so the trial fails the run with the RFC 0252 code itself, then fails as before.
        fail_run(ports, run_id, {"Error": "EvalRecordedFixturesGoneError"})
        raise
    return {"ok": True}


def load_trials(
    ports: Ports, run_id: str, tasks: tuple[int, int] | None = None
) -> dict[tuple[int, int], dict[str, Any]]:
    """Every stored trial of the run by (task index, trial); with ``tasks`` = (start, end), those of tasks
    ``start <= index < end`` only (one key-range Query: trial items sort by task index)."""
    between = (
        None if tasks is None else (f"{keys.TRIAL_PREFIX}{tasks[0]:05d}#", f"{keys.TRIAL_PREFIX}{tasks[1] - 1:05d}#~")
    )
    out: dict[tuple[int, int], dict[str, Any]] = {}
    for _sk, doc in ports.runs.query_aux(run_id, keys.TRIAL_PREFIX, between=between):
        if "blob" in doc:
            got = ports.blobs.get_json(str(doc["blob"]))
            if got is None:
                raise RunGoneError(run_id)
            doc = dict(got)
        out[(int(doc["taskIndex"]), int(doc["trial"]))] = doc
    return out


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
