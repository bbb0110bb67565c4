"""Eval statistics figures (decision 0114): the paired bootstrap of ``scoreDelta`` (through the IdSource's seeded
generator) per suite size, at the resamples a Finish draws (``evalstats.resamples_for``: 1,000 up to 2,000 paired
tasks, fewer past them, 200 at 10,000), the exact bootstrap of a small sample at its limits (decision 0140), and the
golden scorers per output. Pure CPU, no AWS.

Run: ``.venv/bin/python -m bench.bench_stats`` (or ``make bench``). Prints figures; asserts nothing.
"""

from __future__ import annotations

import time

from bench.common import line
from shared.clock import SystemIds
from shared.engine import evalstats, scorers

SIZES = (10, 200, 1000, 10000)
# The exact bootstrap near its limits: 8 tasks of 8 distinct differences (6,435 distinct resamples), 139 pass/fail
# tasks (3 distinct differences: 9,870), 1,000 tasks that only fell or held (2 distinct: 1,001).
EXACT = {
    "8 tasks, 8 distinct differences": [i / 8 - 0.5 for i in range(8)],
    "139 tasks, 3 distinct differences": [float(i % 3 - 1) for i in range(139)],
    "1000 tasks, 2 distinct differences": [-1.0 if i % 10 == 0 else 0.0 for i in range(1000)],
}
OUTPUT = {"order": {"id": 42, "items": ["tea", "cake"], "total": 12.5}, "status": "shipped"}
MATCHES = {
    "regex": {"strategy": "regex", "value": r'"status":"ship+ed"'},
    "json-schema": {"strategy": "json-schema", "value": {"type": "object", "required": ["order", "status"]}},
    "json-path": {"strategy": "json-path", "path": "/order/id", "value": 42},
    "numeric": {"strategy": "numeric", "path": "/order/total", "value": 12.4, "tolerance": 0.2},
    "all-of (3 parts)": {
        "strategy": "all-of",
        "of": [
            {"strategy": "contains", "value": "tea"},
            {"strategy": "json-path", "path": "/status", "value": "shipped"},
            {"strategy": "not-contains", "value": "cancelled"},
        ],
    },
}


def main() -> None:
    ids = SystemIds()
    for n in SIZES:
        diffs = [((i * 7919) % 5 - 2) / 4 for i in range(n)]  # scores in {-0.5 .. 0.5}
        t0 = time.perf_counter()
        ci = evalstats.bootstrap(diffs, ids.seeded(f"bench-{n}"))
        ms = (time.perf_counter() - t0) * 1000
        line(f"paired bootstrap, {n} paired tasks x {ci['resamples']} resamples ({ci['method']})", f"{ms:.1f}", "ms")
    for name, diffs in EXACT.items():
        t0 = time.perf_counter()
        ci = evalstats.bootstrap(diffs, ids.seeded("bench-exact"))
        ms = (time.perf_counter() - t0) * 1000
        line(f"exact bootstrap, {name} ({ci['resamples']} distinct resamples)", f"{ms:.1f}", "ms")
    for name, match in MATCHES.items():
        scorers.score(match, OUTPUT)  # warm: compiled pattern, built validator
        t0 = time.perf_counter()
        for _ in range(1000):
            scorers.score(match, OUTPUT)
        line(f"scorer {name}, per output", f"{(time.perf_counter() - t0) * 1000:.1f}", "us")


if __name__ == "__main__":
    main()
