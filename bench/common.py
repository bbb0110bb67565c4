"""Bench plumbing: the embedded stack, an AWS request counter (botocore event hook), in-process handler calls."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# the handlers' Powertools loggers would print every refused request of the fuzz pass
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

API_KEY = "bench-key-aaaaaaaaaaaaaaaa"
TENANT = "bench"


@dataclass
class RequestCounter:
    """Counts AWS API calls made through our ports' clients, by operation."""

    calls: Counter[str] = field(default_factory=Counter)
    paused: bool = False

    def __call__(self, model: Any = None, **_: Any) -> None:
        if self.paused:
            return
        name = getattr(model, "name", "?")
        service = getattr(getattr(model, "service_model", None), "service_name", "?")
        self.calls[f"{service}:{name}"] += 1

    def total(self) -> int:
        return sum(self.calls.values())

    def reset(self) -> None:
        self.calls.clear()


def start_stack() -> tuple[Any, RequestCounter]:
    logging.getLogger("moto").setLevel(logging.CRITICAL)
    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
    from shared.local.stack import LocalAws
    from shared.services.seed import seed_host
    from shared.wiring import get_ports

    aws = LocalAws()
    aws.start()
    aws.bootstrap()
    ports = get_ports()
    seed_host({API_KEY: TENANT}, ports)
    counter = RequestCounter()
    clients = {id(c): c for c in (ports.runs._c, ports.events._c, ports.tool_calls._c, ports.host._c,  # type: ignore[attr-defined]
                                  ports.blobs._c, ports.orchestrator._c)}  # type: ignore[attr-defined]
    for c in clients.values():
        c.meta.events.register("before-call.*.*", counter)
    return aws, counter


def api_event(method: str, path: str, route: str, body: Any = None, query: str = "") -> dict[str, Any]:
    qs = dict(p.split("=", 1) for p in query.split("&") if p)
    return {
        "version": "2.0", "routeKey": f"{method} {route}", "rawPath": path, "rawQueryString": query,
        "headers": {"authorization": f"Bearer {API_KEY}", "openwop-version": "2.0",
                    "content-type": "application/json"},
        "queryStringParameters": qs or None,
        "requestContext": {"http": {"method": method, "path": path, "sourceIp": "127.0.0.1", "userAgent": "bench",
                                    "protocol": "HTTP/1.1"}, "requestId": "bench", "stage": "$default"},
        "body": json.dumps(body) if body is not None else None, "isBase64Encoded": False,
    }


def call(function: str, event: dict[str, Any]) -> dict[str, Any]:
    from shared.local.front import invoke_in_process

    out: dict[str, Any] = invoke_in_process(function, event)
    return out


def wait_status(ports: Any, run_id: str, counter: RequestCounter | None = None, timeout: float = 600) -> str:
    """Wait for a terminal status; the bench's own polling is not counted."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if counter is not None:
            counter.paused = True
        try:
            rec = ports.runs.get_run(run_id)
        finally:
            if counter is not None:
                counter.paused = False
        if rec is not None and rec.terminal:
            return str(rec.status)
        time.sleep(0.05)
    raise TimeoutError(run_id)


def cold_import_ms(module: str, repeat: int = 3) -> float:
    """Best of ``repeat`` fresh interpreters: the wall time of importing a handler module (with .pyc)."""
    code = f"import time; t=time.perf_counter(); import {module}; print((time.perf_counter()-t)*1000)"
    best = float("inf")
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        best = min(best, float(out.stdout.strip()))
    return best


def line(name: str, value: Any, unit: str = "") -> None:
    print(f"  {name:<58} {value}{(' ' + unit) if unit else ''}")
