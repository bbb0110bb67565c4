"""One eval trial: one invocation of the eval's agent on one task under its fixture plan, run to completion and
graded (``run_trial``); its stored ``TRIAL#`` item (``store_trial``, ``load_trials``); and the keys that order a
trial's calls and items (``invocation_id``, ``order_key``, ``trial_sk``, ``call_keys_between``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from shared import keys
from shared.engine import grading, judge, scorers, toolscorer
from shared.engine.agents import invocation_step, started_payload
from shared.engine.evalplan import INLINE_LIMIT, load_plan
from shared.engine.evalsources import fixture_plan
from shared.engine.kernel import EngineError, resolve_agent
from shared.engine.model_agent import ModelSession, usage_payload
from shared.engine.registry import AgentSpec
from shared.engine.tools import ToolOutcome, ToolRuntime
from shared.errors import RunGoneError
from shared.ports import Ports, RunRecord, ToolCallRecord
from shared.protocol import codes as c

ERROR_MESSAGE_MAX = 500  # a failed trial's stored reason, at most (the TRIAL# item stays small)


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
    cost_unknown: bool = False  # a model call had no known price: the trial's cost is unknown, never a partial sum
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
        if self.cost_usd is not None and not self.cost_unknown:
            doc["costUsd"] = self.cost_usd
        if self.error is not None:
            doc["errorCode"] = self.error.get("code")
            if self.error.get("message"):  # why it failed (an endpoint's timeout, refusal or status): the report's
                doc["errorMessage"] = str(self.error["message"])[:ERROR_MESSAGE_MAX]
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
    agent: AgentSpec | None = None,
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
    agent = agent or resolve_agent(ports, rec.tenant, str(plan["agentId"]), plan.get("agentVersion"))
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
        _take_events(result, progress, step.events, ports.clock.iso())
        if step.outcome is not None and step.call is not None:
            _take_call(result, progress, step.call, step.outcome)
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
    grade(ports, rec, plan, task_index, trial, result, agent, tools, models)
    return result


def _take_events(
    result: TrialResult, progress: dict[str, Any], events: list[tuple[str, dict[str, Any]]], ts: str
) -> None:
    """A step's events into the trial's: a decision into the invocation's progress, a turn's usage into its tokens
    and cost."""
    for t, p in events:
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
            else:
                result.cost_unknown = True


def _take_call(result: TrialResult, progress: dict[str, Any], call: tuple[str, Any], out: ToolOutcome) -> None:
    """A step's tool call into the invocation's history and the trial's calls, latency and fixture misses."""
    progress["calls"] += 1
    progress["history"].append({"status": out.status, "outcome": out.result, "error": out.error})
    result.calls.append({"tool": call[0], "args": call[1]})
    result.latency_ms += int(out.duration_ms or 0)
    if out.miss:
        result.fixture_miss_count += 1


def grade(
    ports: Ports,
    rec: RunRecord,
    plan: dict[str, Any],
    task_index: int,
    trial: int,
    result: TrialResult,
    agent: AgentSpec,
    tools: ToolRuntime,
    models: ModelSession | None,
) -> None:
    """Grade a finished invocation (``result.decided``/``decision``/``calls``/``fixture_miss_count`` set): the
    judge and the tool-answer scorer where the task asks for them, then the task's scorer; sets ``result``'s
    score, pass and scorer (and appends the judge's and the scorer's events)."""
    task = plan["suite"]["tasks"][task_index]
    inv = invocation_id(result.task_id, trial)
    agent_input = task.get("input")
    overrides = (rec.data.get("configurable") or {}).get("ai")
    suite = plan["suite"]
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
            else:
                result.cost_unknown = True
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


# --------------------------------------------------------------------------- its stored item


def store_trial(
    ports: Ports,
    rec: RunRecord,
    result: TrialResult,
    calls: list[ToolCallRecord] | None = None,
    held: TrialWrites | None = None,
) -> None:
    """Write the trial's TRIAL# item with the records of its calls that claimed no effect (``calls``), in one
    transaction while the run is writable (usually the trial's only write); ``ConflictError`` when it is not. With
    ``held``, they join the batch's held writes instead, written with the next trials' (``TrialWrites``)."""
    doc = result.stored()
    sk = trial_sk(result.task_index, result.trial)
    if len(json.dumps(doc, separators=(",", ":"))) > INLINE_LIMIT:
        key = f"{keys.run_prefix(rec.run_id)}trials/{result.task_index:05d}-{result.trial:03d}.json"
        ports.blobs.put_json(key, doc)
        doc = {"blob": key}
    if held is None:
        ports.tool_calls.put_calls(rec.run_id, list(calls or []), rec.expires_at, aux=[(sk, doc)])
    else:
        held.add(list(calls or []), sk, doc)


# A batch's trials are written together (decision 0187): held until they fill a transaction or have waited this long.
HOLD_ITEMS = 98
HOLD_MS = 5_000


class TrialWrites:
    """The writes of a batch's trials, held to be written together: their call records and TRIAL# items in
    transactions of up to 98 items, each with one check that the run is writable (2 write units), rather than a
    transaction and a check per trial. Written as a trial ends once they hold ``HOLD_ITEMS`` items or the oldest
    has waited ``HOLD_MS``, and by ``flush`` (the batch's end, its stop for time, a failure, and before each trial
    once one took ``HOLD_MS``: slow trials are written one by one). A trial held and not written when its invocation
    dies is run again by the retry (it finds no TRIAL# item), as a trial cut before its write is: calls that claimed
    an effect were recorded when made, the others are decided again equal."""

    def __init__(self, ports: Ports, rec: RunRecord) -> None:
        self.ports, self.rec = ports, rec
        self.records: list[ToolCallRecord] = []
        self.aux: list[tuple[str, dict[str, Any]]] = []
        self.since_ms = 0

    def add(self, calls: list[ToolCallRecord], sk: str, doc: dict[str, Any]) -> None:
        if not self.aux:
            self.since_ms = self.ports.clock.now_ms()
        self.records += calls
        self.aux.append((sk, doc))
        if len(self.records) + len(self.aux) >= HOLD_ITEMS or self.ports.clock.now_ms() - self.since_ms >= HOLD_MS:
            self.flush()

    def flush(self) -> None:
        """Write what is held (``ConflictError``: the run is not writable; what is held is dropped either way)."""
        records, aux, self.records, self.aux = self.records, self.aux, [], []
        if aux:
            self.ports.tool_calls.put_calls(self.rec.run_id, records, self.rec.expires_at, aux=aux)


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
