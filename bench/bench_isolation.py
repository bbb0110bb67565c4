"""Tenant isolation under a write flood: tenant B's create-run latency while tenant A floods ``POST /runs`` past its
per-tenant limit, as a ratio to B's latency with no flood, both measured in the same run, side by side.

The local host (moto in-process, one Python process: the flood's refusals and B's requests share its CPU) with the
write bucket at 2 a second, 5 at once per tenant, so the flood is almost all refusals. B creates one run every
0.6 s (within its own bucket): after 5 warm-up creates, 4 rounds of 10 creates with no flood then 10 under A's flood
(6 clients back to back, from a process of their own), so both series see the same machine and the same warm host. Reported: p50 and p99 of B's
create latency (nearest rank) for each series and their ratios, what A got (admitted, refused), and that every run
of B finished. Locally the flood's refusals take CPU from B's requests in the same process; deployed, they run in
Lambda instances of their own, and the limiter answers a refused tenant from memory without a DynamoDB request.

Run: ``make bench`` (or ``.venv/bin/python -m bench.bench_isolation``). Prints figures; asserts nothing.
Traffic goes only to the in-process host on 127.0.0.1, in bounded loops.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections import Counter

from bench.common import line  # (also quiets the handlers' loggers)

RATE, BURST = 2, 5
ROUNDS, PER_ROUND, WARMUP = 4, 10, 5
SPACING_S = 0.6
WORKFLOW = "conformance-noop"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _series(url: str, key: str, n: int) -> tuple[list[float], list[str]]:
    from tests.isolation import create

    seconds, run_ids = [], []
    for _ in range(n):
        answer, took = create(url, key, WORKFLOW)
        if answer.status != 201:
            raise RuntimeError(f"tenant B was refused: {answer.status} {answer.text[:200]}")
        seconds.append(took)
        run_ids.append(answer.json["runId"])
        time.sleep(max(0.0, SPACING_S - took))
    return seconds, run_ids


def main() -> None:
    from openwop_client import OpenwopClient

    from bench.common import served_host
    from tests.isolation import write_limits
    from tests.wire import wait_terminal

    stamp = str(int(time.time()))
    key_a, key_b = f"bench-iso-a-{stamp}", f"bench-iso-b-{stamp}"
    with served_host({key_a: f"tenant-iso-a-{stamp}", key_b: f"tenant-iso-b-{stamp}"}) as (_aws, url):
        unloaded: list[float] = []
        loaded: list[float] = []
        statuses: Counter[int] = Counter()
        flood_seconds = 0.0
        with write_limits(RATE, BURST):
            _warm, runs = _series(url, key_b, WARMUP)
            for _ in range(ROUNDS):
                seconds, more = _series(url, key_b, PER_ROUND)
                unloaded += seconds
                runs += more
                # A floods from a process of its own (its client CPU is not the host's), for as long as B's round
                flood = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "tests.isolation",
                        url,
                        key_a,
                        WORKFLOW,
                        "6",
                        "1000",
                        str(PER_ROUND * SPACING_S + 1),
                    ],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                time.sleep(0.5)  # the flood is under way before B's first request
                seconds, more = _series(url, key_b, PER_ROUND)
                out, _ = flood.communicate(timeout=120)
                loaded += seconds
                runs += more
                got = json.loads(out)
                flood_seconds += got.pop("seconds")
                statuses += Counter({int(k): v for k, v in got.items()})
            client = OpenwopClient(url, key_b)
            finished = sum(wait_terminal(client, r, timeout=120).status == "completed" for r in runs)
        print(
            f"Tenant isolation (local moto; write bucket {RATE}/s, burst {BURST} per tenant; B: {ROUNDS} rounds of "
            f"{PER_ROUND} creates {SPACING_S} s apart unloaded, then {PER_ROUND} under A's flood)"
        )
        for name, q in (("p50", 0.50), ("p99", 0.99)):
            base, under = percentile(unloaded, q), percentile(loaded, q)
            line(
                f"B create-run {name} ms, unloaded / under A's flood",
                f"{base * 1000:.0f} / {under * 1000:.0f}",
                f"(ratio {under / base:.2f})",
            )
        line(
            "A's flood: requests, admitted, refused 429",
            f"{sum(statuses.values())}, {statuses[201]}, {statuses[429]}",
            f"({sum(statuses.values()) / flood_seconds:.0f} req/s over {flood_seconds:.0f} s; other: "
            f"{sum(v for k, v in statuses.items() if k not in (201, 429))})",
        )
        line("B's runs completed", f"{finished} / {len(runs)}")


if __name__ == "__main__":
    main()
