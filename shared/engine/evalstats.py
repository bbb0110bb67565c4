"""Eval statistics that do not cry wolf, pure (docs/decisions/0114).

- pass@k (at least one of k trials passes) and pass^k (all k pass), the unbiased estimators over a task's n trials
  with c passed: ``1 - C(n-c, k) / C(n, k)`` and ``C(c, k) / C(n, k)``. The summary carries them at k = n.
- A task is **flaky** in a baseline when its trials disagree (some passed, some did not); the baseline snapshot
  names its flaky tasks.
- The paired bootstrap interval of ``scoreDelta``: the paired tasks' score differences resampled with replacement
  ``RESAMPLES`` times, the percentile interval of their means at ``CONFIDENCE`` (``pairedMean`` is their mean,
  equal to ``scoreDelta`` when every task pairs). The draws come from the IdSource
  port's seeded generator, seeded from the run's plan (suite, version, baseline): the same run (and its replay)
  always reports the same interval.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from shared.ports import Draws

RESAMPLES = 1000
CONFIDENCE = 0.95
# Draws one Finish may spend on the interval: a suite of more than 2,000 paired tasks gets fewer resamples (at
# least MIN_RESAMPLES; 10,000 tasks: 200), so the bootstrap stays near a second (bench/bench_stats.py).
DRAW_BUDGET = 2_000_000
MIN_RESAMPLES = 200


def pass_at_k(n: int, c: int, k: int) -> float:
    if n <= 0 or k <= 0 or k > n:
        return 0.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    if n <= 0 or k <= 0 or k > n:
        return 0.0
    return math.comb(c, k) / math.comb(n, k)


def trial_stats(passes: list[bool]) -> dict[str, Any]:
    """The summary row's members for a task of more than one trial (none for a single trial)."""
    n, c = len(passes), sum(1 for p in passes if p)
    if n <= 1:
        return {}
    return {"trials": n, "passAtK": pass_at_k(n, c, n), "passHatK": pass_hat_k(n, c, n)}


def curves(n: int, c: int) -> dict[str, dict[str, float]]:
    """pass@k and pass^k for every k = 1..n (the report's)."""
    return {"passAtK": {str(k): pass_at_k(n, c, k) for k in range(1, n + 1)},
            "passHatK": {str(k): pass_hat_k(n, c, k) for k in range(1, n + 1)}}


def is_flaky(row: dict[str, Any]) -> bool:
    """A summary row whose trials disagree: at least one passed (pass@n > 0) and not all (pass^n < 1)."""
    if int(row.get("trials") or 1) <= 1 or "passAtK" not in row:
        return False
    return float(row["passAtK"]) > 0.0 and float(row["passHatK"]) < 1.0


def flaky_tasks(rows: list[dict[str, Any]]) -> list[str]:
    return [str(r["taskId"]) for r in rows if is_flaky(r)]


def seed(plan_suite: dict[str, Any], baseline_run_id: str) -> str:
    """The bootstrap's seed: the run's suite, version and baseline (a replay of the run has the same)."""
    text = f"{plan_suite.get('suiteId')}@{plan_suite.get('version')}#{baseline_run_id}"
    return hashlib.sha256(text.encode()).hexdigest()


def resamples_for(n: int) -> int:
    return min(RESAMPLES, max(MIN_RESAMPLES, DRAW_BUDGET // max(1, n)))


def bootstrap(diffs: list[float], draws: Draws, resamples: int | None = None,
              confidence: float = CONFIDENCE) -> dict[str, Any]:
    """The percentile interval of the mean paired difference, from ``resamples`` resamples of ``diffs`` (default
    ``resamples_for(len(diffs))``)."""
    n = len(diffs)
    resamples = resamples_for(n) if resamples is None else resamples
    means = sorted(sum(draws.choices(diffs, k=n)) / n for _ in range(resamples))
    tail = (1.0 - confidence) / 2
    lo = means[max(0, math.floor(tail * resamples))]
    hi = means[min(resamples - 1, math.ceil((1.0 - tail) * resamples) - 1)]
    return {"pairedMean": sum(diffs) / n, "low": max(-1.0, lo), "high": min(1.0, hi), "confidence": confidence,
            "resamples": resamples, "method": "paired-bootstrap"}
