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
- A small sample gets the exact bootstrap instead (decision 0140): when the distinct resamples (count vectors over
  the distinct differences) number at most ``EXACT_LIMIT``, the interval is read off their exact distribution, the
  limit of infinitely many draws. It depends on the differences only, never on a seed. Three paired tasks, or a
  hundred whose scores are pass/fail, are exact; Monte Carlo noise is never what puts a bound on one side of 0.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections import Counter
from typing import Any

from shared.ports import Draws

RESAMPLES = 1000
CONFIDENCE = 0.95
# Draws one Finish may spend on the interval: a suite of more than 2,000 paired tasks gets fewer resamples (at
# least MIN_RESAMPLES; 10,000 tasks: 200), so the bootstrap stays near a second (bench/bench_stats.py).
DRAW_BUDGET = 2_000_000
MIN_RESAMPLES = 200
# Distinct resamples the exact bootstrap may enumerate (n differences over m distinct values: C(n+m-1, m-1)):
# 8 tasks of 8 distinct differences (6,435), 139 pass/fail tasks (3 distinct: 9,870). About 0.1 s at the limit.
EXACT_LIMIT = 10_000
EXACT_MAX_TASKS = 1_000  # its weights are integers near n**n: past 1,000 tasks Monte Carlo is cheaper


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
    return {
        "passAtK": {str(k): pass_at_k(n, c, k) for k in range(1, n + 1)},
        "passHatK": {str(k): pass_hat_k(n, c, k) for k in range(1, n + 1)},
    }


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


def bootstrap(
    diffs: list[float], draws: Draws, resamples: int | None = None, confidence: float = CONFIDENCE
) -> dict[str, Any]:
    """The percentile interval of the mean paired difference: exact when the sample is small (``exact``), else
    from ``resamples`` resamples of ``diffs`` (default ``resamples_for(len(diffs))``)."""
    n = len(diffs)
    tail = (1.0 - confidence) / 2
    found = exact(diffs, tail)
    if found is not None:
        lo, hi, resamples = found
        method = "paired-bootstrap-exact"
    else:
        resamples = resamples_for(n) if resamples is None else resamples
        means = sorted(sum(draws.choices(diffs, k=n)) / n for _ in range(resamples))
        lo = means[max(0, math.floor(tail * resamples))]
        hi = means[min(resamples - 1, math.ceil((1.0 - tail) * resamples) - 1)]
        method = "paired-bootstrap"
    return {
        "pairedMean": sum(diffs) / n,
        "low": max(-1.0, lo),
        "high": min(1.0, hi),
        "confidence": confidence,
        "resamples": resamples,
        "method": method,
    }


def exact(diffs: list[float], tail: float) -> tuple[float, float, int] | None:
    """The exact bootstrap's percentile bounds and how many distinct resamples it weighed (the summary's
    ``resamples``), or None past ``EXACT_LIMIT`` of them (or ``EXACT_MAX_TASKS`` differences).

    Every one of the n**n equally likely ordered resamples is a count vector k over the m distinct differences
    (value v_i seen c_i times); its weight is the multinomial n!/prod(k_i!) * prod(c_i**k_i), exact integers summing
    to n**n. The bounds are the bootstrap's percentiles: the least mean whose cumulative weight passes ``tail``, and
    the least whose cumulative weight reaches ``1 - tail`` (the Monte Carlo path's order statistics, in the limit).
    """
    n, counts = len(diffs), Counter(diffs)
    values = sorted(counts)
    seen, m = [counts[v] for v in values], len(values)
    distinct = math.comb(n + m - 1, m - 1)
    if distinct > EXACT_LIMIT or n > EXACT_MAX_TASKS:
        return None
    factorial = [math.factorial(i) for i in range(n + 1)]
    weighted: list[tuple[float, int]] = []
    for bars in itertools.combinations(range(n + m - 1), m - 1):  # stars and bars: every k with sum(k) == n
        edges = (-1, *bars, n + m - 1)
        ks = [edges[i + 1] - edges[i] - 1 for i in range(m)]
        weight = factorial[n]
        for k, c in zip(ks, seen, strict=True):
            weight = weight // factorial[k] * c**k
        weighted.append((sum(v * k for v, k in zip(values, ks, strict=True)) / n, weight))
    weighted.sort(key=lambda item: item[0])
    total, cumulative, lo = n**n, 0, None
    for mean, weight in weighted:
        cumulative += weight
        if lo is None and cumulative / total > tail:
            lo = mean
        if cumulative / total >= 1.0 - tail:
            break
    return float(lo if lo is not None else mean), float(mean), distinct
