"""The baseline an eval is compared with (issue 36, docs/decisions/0145-ci-verdict-baselines-and-precedence.md).

A baseline can only show a change when it ran another agent version and passed: a candidate compared with its own
version, or with an eval that failed the same tasks, reads ``unchanged`` on a broken task. So:

- ``--baseline last``: the newest *passed* eval run of the same suite and agent at *another* agent version (for
  ``compare``: older than the candidate). Passed: completed, no fixture miss, and every task met its expectation or is
  marked ``knownFailure`` in its suite version. An agent with no versions (a built-in one) has no version to differ.
- ``--baseline stable`` (the run that admitted the stable deployment) and ``--baseline RUN``: refused (exit 3, with the
  reason) when the run ran the candidate's own version or did not pass.
- ``--baseline-any``: no refusal; ``last`` is then the newest completed eval of the suite and agent, and a run id
  is taken as given (not read before the eval starts).

The CLI prints which run it picked (id, agent version, experiment name, age) on stderr.
"""

from __future__ import annotations

import time
from calendar import timegm
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from shared.cli import experiments
from shared.cli.evalcompare import load_report, task_passed
from shared.cli.evalhost import CliError, Host


@dataclass
class Baseline:
    run_id: str
    how: str  # last | stable | run
    agent_version: str | None
    name: str | None
    created_at: str | None
    passed: bool | None  # None: not read (a run id taken as given with --baseline-any)
    why_not: str | None

    def doc(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "picked": self.how,
            "agentVersion": self.agent_version,
            "name": self.name,
            "createdAt": self.created_at,
            "passed": self.passed,
            "notPassedBecause": self.why_not,
        }


def age(created_at: str | None, now_s: float | None = None) -> str:
    """``3 min ago``, ``2 h ago``, ``5 d ago`` from an RFC 3339 instant; ``age unknown`` without one."""
    if not created_at:
        return "age unknown"
    try:
        at = timegm(time.strptime(created_at[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return "age unknown"
    secs = max(0, int((time.time() if now_s is None else now_s) - at))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if secs >= size:
            return f"{secs // size} {unit} ago"
    return f"{secs} s ago"


def not_passed(host: Host, rep: dict[str, Any]) -> str | None:
    """Why an eval run did not pass (None when it did): it did not complete, missed fixtures, or a task that its
    suite does not mark ``knownFailure`` failed its expectation."""
    if rep.get("status") != "completed":
        return f"it is {rep.get('status')}"
    misses = sum(int(t.get("fixtureMissCount", 0)) for t in rep.get("tasks") or [])
    if misses:
        return f"it had {misses} fixture misses"
    marks = host.suite_marks(rep.get("suiteId"), rep.get("suiteVersion"))
    failed = [
        str(t["taskId"])
        for t in rep.get("tasks") or []
        if not task_passed(t) and not (marks.get(str(t["taskId"])) or {}).get("knownFailure")
    ]
    if failed:
        more = f" and {len(failed) - 3} more" if len(failed) > 3 else ""
        return f"task {', '.join(failed[:3])}{more} failed its expectation"
    return None


def _assessed(host: Host, run_id: str, how: str, row: dict[str, Any] | None = None) -> Baseline:
    rep = load_report(host, run_id)
    row = row or {}
    return Baseline(
        run_id=run_id,
        how=how,
        agent_version=rep.get("agentVersion") or row.get("agentVersion"),
        name=row.get("name"),
        created_at=row.get("createdAt") or _created(host, run_id),
        passed=(why := not_passed(host, rep)) is None,
        why_not=why,
    )


def _created(host: Host, run_id: str) -> str | None:
    created = getattr(host.client.runs_get(run_id), "createdAt", None)
    return None if created is None else str(created)


def last(
    host: Host, suite: str, agent_id: str, version: str | None, *, before: str | None = None, any_: bool = False
) -> Baseline:
    """The newest passed eval run of ``suite`` and ``agent_id`` at another version than ``version`` (``any_``: the
    newest completed one); with ``before``, only runs older than that one."""
    seen = before is None
    skipped = {"same": 0, "failed": 0}
    for row in experiments.eval_runs(host, suite=suite, agent=agent_id, status=None if before else "completed"):
        if row["runId"] == before:
            seen = True
            continue
        if not seen or row.get("status") != "completed":
            continue
        if any_:
            return _assessed(host, str(row["runId"]), "last", row)
        if version is not None and row.get("agentVersion") == version:
            skipped["same"] += 1
            continue
        if row.get("verdict") == "unverifiable":
            skipped["failed"] += 1
            continue
        got = _assessed(host, str(row["runId"]), "last", row)
        if got.passed:
            return got
        skipped["failed"] += 1
    other = f" at a version other than {version}" if version else ""
    raise CliError(
        f"--baseline last: no earlier passed eval run of suite {suite} by agent {agent_id}{other} (passed over "
        f"{skipped['same']} of the same version and {skipped['failed']} that did not pass); "
        "pass --baseline-any to take the newest completed one"
    )


def check(host: Host, run_id: str, how: str, version: str | None, *, any_: bool = False) -> Baseline:
    """A baseline the caller named (a run id, or the run ``stable`` names): refused unless it ran another version
    than ``version`` and passed (``any_``: never refused)."""
    got = _assessed(host, run_id, how)
    if any_:
        return got
    if version is not None and got.agent_version == version:
        raise CliError(
            f"baseline {run_id} ran agent version {version}, the candidate's own: it cannot show what changed "
            "(pass --baseline-any to compare anyway)"
        )
    if not got.passed:
        raise CliError(f"baseline {run_id} did not pass: {got.why_not} (pass --baseline-any to compare anyway)")
    return got


def pick(
    host: Host,
    value: str,
    suite: str,
    agent_id: str,
    version: str | None,
    *,
    before: str | None = None,
    any_: bool = False,
) -> Baseline:
    """``--baseline RUN|stable|last`` resolved and checked."""
    if any_ and value not in experiments.NAMED_BASELINES:
        return Baseline(value, "run", None, None, None, None, None)
    if value == "last":
        return last(host, suite, agent_id, version, before=before, any_=any_)
    if value == "stable":
        return check(host, experiments.stable_baseline(host, agent_id), "stable", version, any_=any_)
    return check(host, value, "run", version, any_=any_)


def say(base: Baseline, err: Console) -> None:
    """The line naming the picked baseline (stderr)."""
    if base.passed is None:
        err.print(f"baseline: {base.run_id} (taken as given: --baseline-any)", highlight=False, markup=False)
        return
    verdict = "passed" if base.passed else f"did not pass: {base.why_not}"
    err.print(
        f"baseline {base.how}: {base.run_id} (agent version {base.agent_version or '-'}, experiment "
        f"{base.name or '-'}, {age(base.created_at)}, {verdict})",
        highlight=False,
        soft_wrap=True,
        markup=False,
    )
