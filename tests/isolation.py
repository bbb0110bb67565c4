"""One tenant floods the host's write routes while another works: the traffic of the isolation test and bench.

Everything goes to the local host on loopback, in bounded loops (a fixed number of requests per flooder).
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from tests.wire import Raw, raw


@contextmanager
def write_limits(rate: int, burst: int) -> Iterator[None]:
    """The per-tenant write bucket at ``rate``/s and ``burst`` for the block (the local host reads settings per
    request: a new Settings builds new ports, whose limiter starts with an empty memory)."""
    from shared.settings import get_settings

    saved = {k: os.environ.get(k) for k in ("TENANT_WRITE_RATE", "TENANT_WRITE_BURST")}
    os.environ.update({"TENANT_WRITE_RATE": str(rate), "TENANT_WRITE_BURST": str(burst)})
    get_settings.cache_clear()
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        get_settings.cache_clear()


def create(url: str, key: str, workflow_id: str) -> tuple[Raw, float]:
    """POST /runs once; (the answer, seconds it took)."""
    began = time.perf_counter()
    answer = raw(url, "POST", "/runs", {"workflowId": workflow_id}, key=key)
    return answer, time.perf_counter() - began


@dataclass
class Flood:
    statuses: Counter[int] = field(default_factory=Counter)
    refusals: list[Raw] = field(default_factory=list)
    admitted_runs: list[str] = field(default_factory=list)
    seconds: float = 0.0


@contextmanager
def flooding(
    url: str, key: str, workflow_id: str, *, threads: int = 6, per_thread: int = 60, until_block_ends: bool = False
) -> Iterator[Flood]:
    """``threads`` clients of one tenant each POST /runs ``per_thread`` times back to back, while the block runs;
    the flood is over (joined) when the block ends. ``until_block_ends``: each client stops early once the block
    has ended (``per_thread`` still bounds it)."""
    flood, lock, ended = Flood(), threading.Lock(), threading.Event()
    began = time.perf_counter()

    def client() -> None:
        for _ in range(per_thread):
            if until_block_ends and ended.is_set():
                break
            answer, _seconds = create(url, key, workflow_id)
            with lock:
                flood.statuses[answer.status] += 1
                if answer.status == 429:
                    flood.refusals.append(answer)
                elif answer.status == 201:
                    flood.admitted_runs.append(answer.json["runId"])

    workers = [threading.Thread(target=client, daemon=True) for _ in range(threads)]
    for w in workers:
        w.start()
    try:
        yield flood
    finally:
        ended.set()
        for w in workers:
            w.join()
        flood.seconds = time.perf_counter() - began


def main(argv: list[str] | None = None) -> None:
    """``python -m tests.isolation URL KEY WORKFLOW THREADS PER_THREAD SECONDS``: flood from this process (so its
    client CPU is not the host's) for at most SECONDS; prints ``{status: count, ..., "seconds": s}`` as JSON."""
    import json
    import sys

    url, key, workflow, threads, per_thread, seconds = argv if argv is not None else sys.argv[1:]
    deadline = time.monotonic() + float(seconds)
    flood, lock = Flood(), threading.Lock()
    began = time.perf_counter()

    def client() -> None:
        for _ in range(int(per_thread)):
            if time.monotonic() > deadline:
                break
            answer, _took = create(url, key, workflow)
            with lock:
                flood.statuses[answer.status] += 1

    workers = [threading.Thread(target=client) for _ in range(int(threads))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    print(json.dumps({**{str(k): v for k, v in flood.statuses.items()}, "seconds": time.perf_counter() - began}))


if __name__ == "__main__":
    main()
