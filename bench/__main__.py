"""``python -m bench``: every benchmark, one after another. A benchmark that raises is reported (with its traceback)
and the others still run; the exit status is 1 if any failed."""

from __future__ import annotations

import importlib
import sys
import traceback

MODULES = (
    "bench.bench_host",
    "bench.bench_first_request",
    "bench.bench_eval",
    "bench.bench_tools",
    "bench.bench_gateway",
    "bench.bench_hardening",
    "bench.bench_providers",
    "bench.bench_agents",
    "bench.bench_cost",
    "bench.bench_webhooks",
    "bench.bench_units",
    "bench.bench_scale",
    "bench.bench_memory",
    "bench.bench_local_state",
    "bench.bench_isolation",
    "bench.bench_divergence",
    "bench.bench_stats",
    "bench.bench_sampling",
    "bench.bench_from_runs",
)

failed = []
for name in MODULES:
    try:
        mod = importlib.import_module(name)
    except ModuleNotFoundError:
        continue
    print(f"== {name}", flush=True)
    try:
        mod.main()
    except Exception:  # noqa: BLE001 - report it, run the rest
        traceback.print_exc()
        failed.append(name)
if failed:
    print(f"== failed: {', '.join(failed)}", flush=True)
    sys.exit(1)
