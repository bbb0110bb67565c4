"""The tool path every agent call takes: allowlist, budget, fixtures, replay, the live tool, the record.

Order of decisions for one call (agent ``A``, tool ``T``, args ``X``):
1. ``T`` not in A's allowlist                       -> ``forbidden``, never runs.
2. the run's tool-call budget is spent              -> ``rate_limited``, never runs.
3. replay fork: served from the source run's recorded call at the same (invocation, index), else fails closed
   (a recorded call is served even if its tool was unregistered since: the record is the history).
4. ``T`` is neither built in nor registered for the tenant (``Catalog``) -> ``forbidden``.
5. a fixture plan: the first unconsumed entry matching (T, X) serves it; a miss fails closed or goes live.
6. live: through the EffectGuard. Built-in tools run here; registered HTTP and MCP tools are validated against
   their input schema (invalid args are an ``error`` outcome, never a request), then claimed, keyed and sent
   (``shared.engine.dispatch``). An exception is an ``error`` outcome.
Every call, whatever decided it, is written to the as-executed tool-call record (write-once per call key,
so a retried step reads the outcome it already made and never re-fires the effect).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shared.caches import LockedLRUCache
from shared.engine import dispatch, spans
from shared.engine.canonical import same_json
from shared.engine.catalog import Catalog, ResolvedTool
from shared.engine.matching import args_match
from shared.engine.registry import COUNTER_TOOL, ECHO_TOOL, FAIL_TOOL, TOOLS, AgentSpec
from shared.errors import StorageError
from shared.ports import EffectDeniedError, Ports, ToolCallRecord
from shared.protocol import codes as c
from shared.protocol.toolids import transport_of

FIXTURE_MISS = "openwop-serverless.fixture_miss"
LIVE_READ_ONLY = "live-read-only"  # onMiss: a miss goes live only for a read-only tool
READ_ONLY_TIERS = ("pure", "read")


class ToolError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class ToolOutcome:
    status: str  # ok | error | forbidden | rate_limited
    result: Any = None
    error: dict[str, Any] | None = None
    source: str = "live"  # live | fixture | recorded | none
    duration_ms: int | None = None
    miss: bool = False
    transport: str = "native"  # native | http | mcp: how the tool is reached (agent.tool-called.transport)
    counter: str | None = None  # a counter increment to perform with the call's record (its key)
    claimed: bool = False  # an outside effect was claimed for it: its record must be written before it is used
    # An MCP call's ``negotiation.decided`` payload (accepted or refused), kept with its record: every reader of the
    # outcome (a retried step, a replay serving it) emits the same event right before the call's own events.
    negotiation: dict[str, Any] | None = None


@dataclass
class ToolTally:
    """What one task's tool and model calls came to, for its handler's metrics (the engine emits nothing itself):
    tool calls by (transport, status, source), RFC 0252 fixture misses, model calls sent by (provider, status). A retried step's calls, answered from their stored
    records, are not counted again."""

    calls: dict[tuple[str, str, str], int] = field(default_factory=dict)
    fixture_misses: int = 0
    model_calls: dict[tuple[str, str], int] = field(default_factory=dict)  # sent to a provider: (provider, status)

    def add(self, outcome: ToolOutcome) -> None:
        key = (outcome.transport, outcome.status, outcome.source)
        self.calls[key] = self.calls.get(key, 0) + 1
        if outcome.miss:
            self.fixture_misses += 1

    def add_model_call(self, provider: str, status: str) -> None:
        """One request sent to a model provider (``ok`` or the error code); calls served from a log are not sent."""
        self.model_calls[(provider, status)] = self.model_calls.get((provider, status), 0) + 1


@dataclass
class FixturePlan:
    """A task's fixtures: entries {tool, args?, argsMatch?, response?, isError?}, onMiss (``fail`` | ``live`` |
    ``live-read-only``) and the task's ``fixtureMatching`` rules (None: exact, ``shared.engine.matching``)."""

    entries: list[dict[str, Any]]
    on_miss: str = "fail"
    consumed: set[int] = field(default_factory=set)
    rules: dict[str, Any] | None = None

    def take(self, tool: str, args: Any) -> dict[str, Any] | None:
        for i, e in enumerate(self.entries):
            if i in self.consumed or e.get("tool") != tool:
                continue
            if "args" in e and not args_match(e.get("args"), args, self.rules):
                continue
            self.consumed.add(i)
            return e
        return None

    def goes_live(self, tier: str) -> bool:
        """Whether a call that matched no entry goes live: ``live`` always, ``live-read-only`` only for a tool whose
        safety tier is read-only (``pure``, ``read``), never for an effect tool."""
        return self.on_miss == "live" or (self.on_miss == LIVE_READ_ONLY and tier in READ_ONLY_TIERS)

    def fresh(self) -> FixturePlan:
        """Consumption resets per trial."""
        return FixturePlan(list(self.entries), self.on_miss, rules=self.rules)


class Guard:
    """The EffectGuard: allow-listed seams in live/branch runs; default-deny everything in replay."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def check(self, seam: str) -> None:
        if self.mode == "replay":
            raise EffectDeniedError(seam)


def _error_obj(code: str, message: str) -> dict[str, Any]:
    return {"code": code, "message": message}


def run_live_tool(ports: Ports, tenant: str, tool: str, args: Any) -> Any:
    """The built-in tools without an effect (the counter's increment is ``ToolRuntime._increment``)."""
    if tool == COUNTER_TOOL:  # a read (an increment is written with its record: ``ToolRuntime._increment``)
        if not _counter_args(args, "read"):
            raise ToolError(c.VALIDATION_ERROR, "counter args are {op: inc|read, key: string}")
        return {"key": args["key"], "count": ports.counters.get_count(tenant, args["key"])}
    if tool == ECHO_TOOL:
        return args
    if tool == FAIL_TOOL:
        raise ToolError(c.EXTERNAL_CALL_FAILED, "the tool failed")
    raise ToolError(c.NOT_FOUND, "unknown tool")


def _counter_args(args: Any, op: str) -> bool:
    return (
        isinstance(args, dict)
        and set(args) <= {"op", "key"}
        and args.get("op") == op
        and isinstance(args.get("key"), str)
    )


COUNTER_ATTEMPTS = 8  # optimistic increments of a contended counter before the call is an error outcome
_counts: LockedLRUCache[tuple[str, str], int] = LockedLRUCache(
    maxsize=1024
)  # the last count this container saw per counter: a guess, checked on write


def _recorded(rec: dict[str, Any]) -> ToolOutcome:
    """A call resolved from a source run's as-executed record (never live)."""
    tool = str(rec.get("toolName", ""))
    return ToolOutcome(
        rec["status"],
        rec.get("result"),
        rec.get("error"),
        "recorded",
        rec.get("durationMs"),
        bool(rec.get("miss")),
        str(rec.get("transport") or transport_of(tool, tool in TOOLS)),
        negotiation=rec.get("negotiation"),
    )


def key_of_call(order_key: str, index: int) -> str:
    """A call's record key: its invocation's order key (a workflow run's: the 12-digit sequence of the invocation's
    ``agent.invocation-started``) and the call's index in the invocation (``callId`` = ``<invocationId>#<index>``)."""
    return f"{order_key}#{index:05d}"


@dataclass
class ToolRuntime:
    ports: Ports
    run_id: str
    tenant: str
    mode: str  # live | replay | branch
    expires_at: int
    budget: int
    source_calls: dict[tuple[str, int], dict[str, Any]] | None = None
    # Calls inside a fork's copied prefix are fixed history in every mode (a branch re-fires only after fromSeq).
    recorded_first: dict[tuple[str, int], dict[str, Any]] | None = None
    plan: FixturePlan | None = None
    catalog: Catalog | None = None
    tally: ToolTally | None = None  # the calling task's counts (metrics), when it asks for them
    # When a list: records of calls that claimed no outside effect are kept here for the caller to write with its
    # own result (an eval trial: one transaction); deciding them again on a retry gives the same outcomes.
    deferred: list[ToolCallRecord] | None = None
    # With ``deferred``: the records of calls that claimed an outside effect are kept there too; the caller writes
    # them before it uses their outcomes (the agent gateway: with the call's events, in one write).
    defer_claimed: bool = False
    # How a call claims the intent of its outside effect (effect key and value) or, for an effect that is its own
    # record (the counter's increment: key None), just the right to perform it; None: ``runs.claim_effect``. The agent
    # gateway claims the call's ordinal in the same write (decision 0149); it answers True or raises.
    claimer: Callable[[str | None, dict[str, Any] | None], bool] | None = None

    def __post_init__(self) -> None:
        if self.catalog is None:
            self.catalog = Catalog(self.ports, self.tenant)

    def call(
        self,
        *,
        agent: AgentSpec,
        invocation_id: str,
        order_key: str,
        index: int,
        tool: str,
        args: Any,
        calls_so_far: int,
    ) -> ToolOutcome:
        # No read first: deciding again is deterministic (recorded, fixture, forbidden, budget) or exactly-once
        # (the counter moves only with its call's write-once record), and the write-once record below returns the outcome a
        # retried step already made. Deciding again also re-consumes the same fixture entry, as the first try did.
        tracing = self.ports.tracing
        with tracing.span(
            f"execute_tool {tool}", spans.tool_call(tool, f"{invocation_id}#{index}", self.run_id, self.tenant)
        ) as span:
            outcome = self._call(agent, invocation_id, order_key, index, tool, args, calls_so_far)
            spans.tool_outcome(
                span,
                outcome.status,
                outcome.source,
                outcome.transport,
                outcome.error,
                args,
                outcome.result,
                tracing.capture_content,
            )
        return outcome

    def _call(
        self, agent: AgentSpec, invocation_id: str, order_key: str, index: int, tool: str, args: Any, calls_so_far: int
    ) -> ToolOutcome:
        call_key = key_of_call(order_key, index)
        started = self.ports.clock.now_ms()
        outcome = self._decide(agent, invocation_id, index, tool, args, calls_so_far, call_key)
        if outcome.source != "recorded":
            outcome.transport = transport_of(tool, tool in TOOLS)
        if outcome.duration_ms is None and outcome.status in ("ok", "error") and outcome.source != "none":
            outcome.duration_ms = max(0, self.ports.clock.now_ms() - started)
        record = ToolCallRecord(
            run_id=self.run_id,
            call_key=call_key,
            agent_id=agent.agent_id,
            invocation_id=invocation_id,
            delegate=False,
            tool_name=tool,
            call_id=f"{invocation_id}#{index}",
            args=args,
            status=outcome.status,
            result=outcome.result if outcome.status == "ok" else None,
            error=outcome.error,
            source=outcome.source,
            started_at=self.ports.clock.iso(started),
            duration_ms=outcome.duration_ms,
            extra={
                "transport": outcome.transport,
                **({"miss": True} if outcome.miss else {}),
                **({"negotiation": outcome.negotiation} if outcome.negotiation is not None else {}),
            },
        )
        if outcome.counter is not None and self.claimer is not None:
            self.claimer(None, None)
        counted = self._increment(record, outcome.counter) if outcome.counter is not None else None
        if counted is not None:
            outcome = counted  # written with its increment
        elif self.deferred is not None and (self.defer_claimed or not outcome.claimed) and outcome.counter is None:
            self.deferred.append(record)
        else:
            if outcome.counter is not None:  # recorded before (a retried step) or contended: the record says which
                outcome = ToolOutcome(record.status, record.result, record.error, "live", record.duration_ms)
            if not self.ports.tool_calls.put_call(record, self.expires_at):
                prior = self.ports.tool_calls.get_call(self.run_id, call_key)
                if prior is not None:
                    return outcome_of(prior)
        if self.tally is not None:
            self.tally.add(outcome)
        return outcome

    def _decide(
        self, agent: AgentSpec, invocation_id: str, index: int, tool: str, args: Any, calls_so_far: int, call_key: str
    ) -> ToolOutcome:
        """The call's outcome: refused (allowlist, budget), recorded (a fixed or replayed call), from a fixture, or
        live through the guard."""
        refused = self._refused(agent, tool, calls_so_far)
        if refused is not None:
            return refused
        recorded = self._recorded_outcome(invocation_id, index, tool, args)
        if recorded is not None:
            return recorded
        assert self.catalog is not None
        resolved = self.catalog.resolve(tool)
        if resolved is None:
            return ToolOutcome(
                "forbidden", error=_error_obj(c.FORBIDDEN, "the agent may not call this tool"), source="none"
            )
        if self.plan is not None:
            fixture = self._fixture_outcome(self.plan, resolved, tool, args)
            if fixture is not None:
                return fixture
        guard = Guard("live" if self.mode != "replay" else "replay")
        if resolved.transport != "native":
            return self._send(guard, resolved, call_key, args)
        return self._native(guard, tool, args)

    def _refused(self, agent: AgentSpec, tool: str, calls_so_far: int) -> ToolOutcome | None:
        """A call the agent's allowlist or the run's tool-call budget refuses; None when both let it through."""
        if agent.tool_allowlist is not None and tool not in agent.tool_allowlist:
            return ToolOutcome(
                "forbidden", error=_error_obj(c.FORBIDDEN, "the agent may not call this tool"), source="none"
            )
        if calls_so_far >= self.budget:
            return ToolOutcome(
                "rate_limited", error=_error_obj(c.RATE_LIMITED, "the run's tool-call budget is spent"), source="none"
            )
        return None

    def _recorded_outcome(self, invocation_id: str, index: int, tool: str, args: Any) -> ToolOutcome | None:
        """The recorded outcome of a fixed call or, in a replay, of the source's same call (an error without one);
        None for a call that is neither."""
        fixed = (self.recorded_first or {}).get((invocation_id, index))
        if fixed is not None and fixed.get("toolName") == tool and same_json(fixed.get("args"), args):
            return _recorded(fixed)
        if self.mode != "replay" or self.source_calls is None:
            return None
        rec = self.source_calls.get((invocation_id, index))
        if rec is None or rec.get("toolName") != tool or not same_json(rec.get("args"), args):
            return ToolOutcome(
                "error",
                error=_error_obj(c.REPLAY_SOURCE_MISSING, "no recorded outcome for this call in the source run"),
                source="recorded",
            )
        return _recorded(rec)

    @staticmethod
    def _fixture_outcome(plan: FixturePlan, resolved: ResolvedTool, tool: str, args: Any) -> ToolOutcome | None:
        """The plan's fixture for the call, or a miss when the tool's tier may not go live; None: it goes live."""
        entry = plan.take(tool, args)
        if entry is not None:
            if entry.get("isError"):
                resp = entry.get("response")
                err = (
                    resp
                    if isinstance(resp, dict) and "code" in resp and "message" in resp
                    else _error_obj(c.EXTERNAL_CALL_FAILED, "fixture error")
                )
                return ToolOutcome("error", error=err, source="fixture")
            return ToolOutcome("ok", entry.get("response"), source="fixture")
        if not plan.goes_live(resolved.safety_tier):
            return ToolOutcome(
                "error", error=_error_obj(FIXTURE_MISS, "no fixture matches this call"), source="fixture", miss=True
            )
        return None

    def _native(self, guard: Guard, tool: str, args: Any) -> ToolOutcome:
        """A native tool's live outcome: the counter's increment is left to the call's record write."""
        if tool == COUNTER_TOOL and _counter_args(args, "inc"):
            try:
                guard.check("storage.conformance-counter")
            except EffectDeniedError:
                return ToolOutcome(
                    "error", error=_error_obj(c.REPLAY_SOURCE_MISSING, "effect refused in replay"), source="none"
                )
            return ToolOutcome("ok", source="live", counter=str(args["key"]))
        try:
            result = run_live_tool(self.ports, self.tenant, tool, args)
            return ToolOutcome("ok", result, source="live")
        except EffectDeniedError:
            return ToolOutcome(
                "error", error=_error_obj(c.REPLAY_SOURCE_MISSING, "effect refused in replay"), source="none"
            )
        except ToolError as exc:
            return ToolOutcome(
                "error",
                error=_error_obj(exc.code if exc.code != c.NOT_FOUND else c.EXTERNAL_CALL_FAILED, exc.message),
                source="live",
            )
        except StorageError:
            raise  # the run stopped being writable (or storage failed): no outcome is recorded for this call
        except Exception:  # a tool that raises is an error outcome, never a lost call
            return ToolOutcome("error", error=_error_obj(c.EXTERNAL_CALL_FAILED, "the tool raised"), source="live")

    def _increment(self, record: ToolCallRecord, key: str) -> ToolOutcome | None:
        """The counter's increment and the call's record in one write (``put_counted_call``), from the count this
        container last saw (read once when unknown; a stale guess costs one more write, told the current count).
        None when nothing was written: the call was recorded before (a retried step: the caller's write-once record
        path returns that outcome; the counter moved once for the call) or the counter stayed contended (``record``
        now holds that error outcome, for the caller to write)."""
        counter = self.ports.counters.get_ref(self.tenant, key)
        expected = _counts.get(counter)
        for _ in range(COUNTER_ATTEMPTS):
            if expected is None:
                expected = self.ports.counters.get_count(self.tenant, key)
            record.result = {"key": key, "count": expected + 1}
            got, count = self.ports.tool_calls.put_counted_call(record, self.expires_at, counter, expected)
            if got == "written":
                _counts[counter] = int(count or 0)
                return ToolOutcome("ok", record.result, source="live", duration_ms=record.duration_ms)
            if got == "recorded":
                return None
            expected = count
        _counts.pop(counter, None)
        record.status, record.result = "error", None
        record.error = _error_obj(c.EXTERNAL_CALL_FAILED, "the counter is contended")
        return None

    def _send(self, guard: Guard, tool: ResolvedTool, call_key: str, args: Any) -> ToolOutcome:
        """A registered HTTP or MCP tool: validated, claimed while the run is writable, sent at most once more."""
        assert self.catalog is not None
        if self.catalog.argument_errors(tool, args):
            return ToolOutcome(
                "error",
                error=_error_obj(c.VALIDATION_ERROR, "the arguments do not match the tool's inputSchema"),
                source="none",
            )
        try:
            guard.check(f"tool.{tool.transport}")
        except EffectDeniedError:
            return ToolOutcome(
                "error", error=_error_obj(c.REPLAY_SOURCE_MISSING, "effect refused in replay"), source="none"
            )
        intent = {"seam": f"tool.{tool.transport}", "toolId": tool.tool_id, "at": self.ports.clock.iso()}
        if self.claimer is not None:
            claimed = self.claimer(f"call#{call_key}", intent)
        else:
            claimed = self.ports.runs.claim_effect(self.run_id, f"call#{call_key}", intent, self.expires_at)
        if not claimed:  # a retried step: an outcome already recorded is returned, never sent again
            prior = self.ports.tool_calls.get_call(self.run_id, call_key)
            if prior is not None:
                again = outcome_of(prior)
                again.claimed = True
                return again
        sent = dispatch.send(self.ports, tool, self.tenant, self.run_id, call_key, args)
        return ToolOutcome(
            sent.status, sent.result, sent.error, source="live", claimed=True, negotiation=sent.negotiation
        )


def outcome_of(rec: ToolCallRecord) -> ToolOutcome:
    """The outcome a stored tool-call record holds."""
    return ToolOutcome(
        rec.status,
        rec.result,
        rec.error,
        rec.source,
        rec.duration_ms,
        bool(rec.extra.get("miss")),
        str(rec.extra.get("transport") or transport_of(rec.tool_name, rec.tool_name in TOOLS)),
        negotiation=rec.extra.get("negotiation"),
    )
