"""``python -m bench [name ...]``: every benchmark, or those named (``cost`` is ``bench.bench_cost``), one after
another, each in an interpreter of its own. A benchmark's local stack, clients and warm caches never reach the next:
run in one process, ``bench_webhooks``' subscriptions were still its tenant's in ``bench_units``' rows without a
subscriber. A benchmark that fails is reported and the others still run; the exit status is 1 if any failed, 2 for
a name that is no benchmark."""

from __future__ import annotations

import subprocess
import sys

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


def selected(names: list[str]) -> list[str]:
    """The modules ``names`` pick (``cost``, ``bench_cost`` or ``bench.bench_cost``), in the order given; all of them
    when none is given. ``ValueError`` names one that is no benchmark."""
    picked = []
    for name in names:
        module = (
            name if name.startswith("bench.") else f"bench.{name if name.startswith('bench_') else 'bench_' + name}"
        )
        if module not in MODULES:
            raise ValueError(name)
        picked.append(module)
    return picked or list(MODULES)


def main(argv: list[str]) -> int:
    try:
        modules = selected(argv)
    except ValueError as exc:
        print(f"no benchmark {exc}; one of: {', '.join(m.removeprefix('bench.bench_') for m in MODULES)}")
        return 2
    failed = []
    for name in modules:
        print(f"== {name}", flush=True)
        if subprocess.run([sys.executable, "-m", name], check=False).returncode != 0:
            failed.append(name)
    if failed:
        print(f"== failed: {', '.join(failed)}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
