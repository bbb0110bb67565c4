"""``python -m bench``: every benchmark, one after another."""

from __future__ import annotations

import importlib

for name in ("bench.bench_host", "bench.bench_eval", "bench.bench_tools", "bench.bench_hardening", "bench.bench_providers", "bench.bench_agents",
             "bench.bench_scale"):
    try:
        mod = importlib.import_module(name)
    except ModuleNotFoundError:
        continue
    print(f"== {name}")
    mod.main()
