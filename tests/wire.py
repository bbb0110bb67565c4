"""Raw HTTP against the local host, for wire-level assertions the client hides (status, headers, bytes)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any


@dataclass
class Raw:
    status: int
    headers: dict[str, str]
    text: str

    @property
    def json(self) -> Any:
        return json.loads(self.text) if self.text else None


def raw(
    base_url: str,
    method: str,
    path: str,
    body: Any = None,
    *,
    key: str | None = None,
    headers: dict[str, str] | None = None,
    data: bytes | None = None,
) -> Raw:
    h = {"OpenWOP-Version": "2.0", "Accept": "application/json"}
    if key is not None:
        h["Authorization"] = f"Bearer {key}"
    if body is not None:
        data = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    h.update(headers or {})
    req = urllib.request.Request(base_url + path, data=data, headers=h, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return Raw(resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read().decode())
    except urllib.error.HTTPError as err:
        return Raw(err.code, {k.lower(): v for k, v in err.headers.items()}, err.read().decode())


def wait_terminal(client: Any, run_id: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        snap = client.runs_get(run_id)
        if snap.status in ("completed", "failed", "cancelled"):
            return snap
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} still {snap.status} after {timeout}s")
        time.sleep(0.1)


def all_events(client: Any, run_id: str) -> list[Any]:
    out: list[Any] = []
    after: int | None = None
    while True:
        page = client.runs_poll_events(run_id, after_sequence=after, timeout_seconds=1)
        out.extend(page.events)
        if not page.events or page.lastSequence == (out[-1].sequence if out else -1):
            if page.isTerminal or not page.events:
                return out
        after = page.lastSequence


def types_of(events: list[Any]) -> list[tuple[str, str | None]]:
    return [(e.type, e.nodeId) for e in events]


def wait_for_events(client: Any, run_id: str, pred: Any, timeout: float = 20.0) -> list[Any]:
    """Poll the run's events until ``pred(events)`` holds; fail the test on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = all_events(client, run_id)
        if pred(events):
            return events
        time.sleep(0.05)
    raise AssertionError("condition not reached")
