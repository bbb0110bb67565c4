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
def flooding(url: str, key: str, workflow_id: str, *, threads: int = 6, per_thread: int = 60) -> Iterator[Flood]:
    """``threads`` clients of one tenant each POST /runs ``per_thread`` times back to back, while the block runs;
    the flood is over (joined) when the block ends."""
    flood, lock = Flood(), threading.Lock()
    began = time.perf_counter()

    def client() -> None:
        for _ in range(per_thread):
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
        for w in workers:
            w.join()
        flood.seconds = time.perf_counter() - began
