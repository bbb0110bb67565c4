"""Which answers an eval trial's tool calls are served (eval.md §5.1, RFC 0252): a derived copy of a recorded run
(``fixtureRuns``), a suite task's ``sourceRunId``'s as-executed record, the suite's own fixtures, or live tools
(``fixture_plan``); and the fixture entries a run's as-executed record yields (``entries_from_records``).
"""

from __future__ import annotations

from typing import Any

from shared import keys
from shared.engine.matching import rules_for
from shared.engine.tools import LIVE_READ_ONLY, FixturePlan
from shared.errors import EvalRecordedFixturesGoneError, RunGoneError
from shared.ports import Ports, RunRecord, ToolCallRecord
from shared.protocol import codes as c

# On a plan: the suite's sources were linked under the eval run at create (a source erased before is tombstoned in the
# plan), so a trial reads its source without a link of its own (docs/decisions/0121-from-runs-at-ten-thousand.md).
SOURCES_LINKED = "sourcesLinked"


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
    """The entries of the eval's agent from the as-executed record of a suite task's ``sourceRunId``, read at each
    trial (no copy); a source of another tenant, or one being erased, serves nothing (fail-closed). ``served``, the
    eval run a trial serves, is first linked under the source, so the source's erasure erases it
    (docs/decisions/0108-erasure-reaches-served-evals.md, "A task served from its sourceRunId")."""
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
