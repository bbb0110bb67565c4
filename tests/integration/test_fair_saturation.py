"""Fair compute under the deployed ceilings, modelled locally (decision 0160): the local Lambda runner enforces a
function's reserved concurrency (``shared.local.reserved``: past it, ``Lambda.TooManyRequestsException``, which the
run machine's Retry takes). Tenant A saturates its own cap of runs in flight with runs that hold ``advance_run``
(an HTTP node the test's loopback server answers only when told); tenant B's runs still find ``advance_run`` room
and complete, while A's runs past its cap wait ``pending`` and start in creation order as A's slots free."""

from __future__ import annotations

import http.server
import json
import math
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from shared.local import reserved
from shared.local.commands import seed
from tests.helpers import eventually, setting, unique
from tests.integration.test_fair_compute import runs_in_flight
from tests.wire import raw
from tests.workflows import definition, node, variable

A_CAP = 3  # tenant A's runs in flight
ADVANCE_RUN_CEILING = A_CAP + 2  # advance_run's reserved concurrency for the test: A's cap leaves B two
A_RUNS, B_RUNS = 9, 4


class Gate:
    """A loopback server whose ``POST /hold`` answers only once ``release``d, recording each request's ``i``."""

    def __init__(self) -> None:
        self.arrivals: list[int] = []
        self._open = threading.Semaphore(0)
        gate = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
                gate.arrivals.append(int(body["i"]))
                gate._open.acquire(timeout=150)
                answer = json.dumps({"ok": True}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def release(self, n: int = 1) -> None:
        for _ in range(n):
            self._open.release()

    def stop(self) -> None:
        self.release(100)
        self.server.shutdown()


def allowlisted(port: int) -> AbstractContextManager[None]:
    return setting("HTTP_ALLOWLIST", f"127.0.0.1:{port}")


@pytest.fixture()
def gate() -> Iterator[Gate]:
    g = Gate()
    yield g
    g.stop()


def _ports() -> Any:
    from shared.wiring import get_ports

    return get_ports()


def _status(run_id: str) -> tuple[str, bool]:
    from tests.helpers import execution_started

    rec = _ports().runs.get_run(run_id)
    assert rec is not None
    return rec.status, execution_started(_ports(), run_id)


def _create(host: Any, key: str, workflow_id: str, inputs: dict[str, Any] | None = None) -> tuple[str, float]:
    body: dict[str, Any] = {"workflowId": workflow_id, **({"inputs": inputs} if inputs else {})}
    answer = raw(host.base_url, "POST", "/runs", body, key=key)
    assert (answer.status, answer.json["status"]) == (201, "pending"), answer.text
    return str(answer.json["runId"]), time.monotonic()


def _terminal(client: Any, created: dict[str, float], timeout: float = 120) -> dict[str, tuple[str, float]]:
    """Wait for every run to end: run id -> (status, seconds from its create to the first read that saw it end)."""
    ended: dict[str, tuple[str, float]] = {}
    deadline = time.monotonic() + timeout
    while len(ended) < len(created):
        for run_id, t0 in created.items():
            if run_id not in ended:
                status = client.runs_get(run_id).status
                if status in ("completed", "failed", "cancelled"):
                    ended[run_id] = (status, time.monotonic() - t0)
        assert time.monotonic() < deadline, f"runs still going after {timeout}s: {set(created) - set(ended)}"
        time.sleep(0.05)
    return ended


def _p99(seconds: list[float]) -> float:
    ordered = sorted(seconds)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


def test_b_completes_while_a_saturates_its_cap_and_a_waits_in_order(host, gate):
    from shared.services.workflows import register_workflow

    # Given two tenants, A's workflow one HTTP node the gate holds (each run holds an advance_run meanwhile)
    tenant_a, tenant_b = unique("tenant-sat-a"), unique("tenant-sat-b")
    key_a, key_b = unique("key-sat-a"), unique("key-sat-b")
    assert seed({key_a: tenant_a, key_b: tenant_b})
    held = definition(
        unique("held"),
        [
            node(
                "h",
                "core.http",
                config={"url": f"http://127.0.0.1:{gate.port}/hold", "method": "POST", "timeoutSeconds": 150},
                inputs={"body": variable("tag")},
            )
        ],
        variables=[{"name": "tag", "type": "object", "required": True}],
    )
    held_id = register_workflow(_ports(), tenant_a, held)
    # and the deployed ceilings modelled small: A may have 3 runs in flight, advance_run 5 executions at once
    throttled_before = reserved.throttled("advance_run")
    with allowlisted(gate.port), runs_in_flight(A_CAP), reserved.ceilings({"advance_run": ADVANCE_RUN_CEILING}):
        # When A creates 9 runs at once
        a_runs = [_create(host, key_a, held_id, {"tag": {"i": i}}) for i in range(A_RUNS)]
        a_ids = [r for r, _ in a_runs]
        # Then 3 reach the gate (each holding an advance_run) and the other 6 wait pending, unstarted
        eventually(lambda: len(gate.arrivals) == A_CAP, timeout=60)
        assert sorted(gate.arrivals) == list(range(A_CAP))
        assert [_status(r) for r in a_ids[A_CAP:]] == [("pending", False)] * (A_RUNS - A_CAP)
        assert _ports().slots.in_flight(tenant_a) == A_CAP
        eventually(lambda: reserved.in_use("advance_run") == A_CAP, timeout=30)
        # When B creates 4 runs meanwhile
        b_runs = dict(_create(host, key_b, "conformance-noop") for _ in range(B_RUNS))
        # Then every one of B's completes while A still holds its 3 and its 6 still wait
        b_ended = _terminal(host.client(key_b), b_runs)
        assert [status for status, _ in b_ended.values()] == ["completed"] * B_RUNS
        assert len(gate.arrivals) == A_CAP
        assert [_status(r) for r in a_ids[A_CAP:]] == [("pending", False)] * (A_RUNS - A_CAP)
        # When the gate lets A's runs through one at a time
        for n in range(A_CAP, A_RUNS):
            gate.release(1)
            # Then each freed slot starts A's oldest waiting run: they reach the gate in creation order
            eventually(lambda n=n: len(gate.arrivals) == n + 1, timeout=60)
            assert gate.arrivals[n] == n, gate.arrivals
            assert [_status(r)[1] for r in a_ids[n + 1 :]] == [False] * (A_RUNS - n - 1)
        gate.release(A_CAP)
        a_ended = _terminal(host.client(key_a), dict(a_runs))
        # and all of A's complete, none failed, its slots all given back
        assert [a_ended[r][0] for r in a_ids] == ["completed"] * A_RUNS
        eventually(lambda: _ports().slots.in_flight(tenant_a) == 0, timeout=30)
        assert _ports().slots.read_waiting(tenant_a, 10) == []
        assert _ports().slots.in_flight(tenant_b) == 0
    b_p99 = _p99([s for _, s in b_ended.values()])
    a_p99 = _p99([s for _, s in a_ended.values()])
    print(
        f"\nfair compute: advance_run ceiling {ADVANCE_RUN_CEILING}, A's cap {A_CAP}; create->terminal p99: "
        f"B {b_p99:.2f}s ({B_RUNS} runs, while A saturated), A {a_p99:.2f}s ({A_RUNS} runs, held by the test); "
        f"advance_run throttled {reserved.throttled('advance_run') - throttled_before}x"
    )


def test_an_invocation_past_a_function_s_reserved_concurrency_is_throttled(local_aws):
    # Given advance_run's ceiling lowered to 0 (every unit in use)
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError

    from shared import manifest
    from shared.local.stack import REGION

    name = manifest.function("advance_run").local_name
    once = Config(retries={"max_attempts": 1, "mode": "standard"})
    client = boto3.client("lambda", region_name=REGION, endpoint_url=local_aws.endpoint, config=once)
    with reserved.ceilings({"advance_run": 0}):
        # When it is invoked synchronously
        with pytest.raises(ClientError) as refused:
            client.invoke(FunctionName=name, Payload=b"{}")
    # Then Lambda's throttle is answered: 429 TooManyRequestsException (a task's Retry names it)
    assert refused.value.response["Error"]["Code"] == "TooManyRequestsException"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 429
    assert reserved.in_use("advance_run") == 0
