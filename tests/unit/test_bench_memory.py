"""The memory and first-request benches' pure parts (issue 38, items 6 and 7): no stack, no timing assertions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench import bench_first_request as fr
from bench import bench_memory as bm
from shared import manifest
from shared.manifest.routes import ROUTES

RUN = "bench/r-01JABCDEFGHJKMNPQRSTVWXYZ0"
ROOT = Path(__file__).resolve().parents[2]


def test_proc_status_figures_are_read_in_kilobytes():
    text = "Name:\tpython\nVmHWM:\t  306544 kB\nVmRSS:\t   13572 kB\n"
    assert bm.status_kb(text, "VmRSS") == 13572
    assert bm.status_kb(text, "VmHWM") == 306544
    assert bm.status_kb(text, "VmSwap") == 0


def test_the_verdict_is_half_the_configured_size():
    assert bm.verdict(128, 256) == (0.5, True)
    assert bm.verdict(129, 256)[1] is False


def test_a_row_states_both_rises_the_estimate_and_the_verdict():
    out = {"calls": 3, "rss_mb": 6.8, "py_mb": 11.7, "process_mb": 278.0, "seconds": 24.0}
    label, figures = bm.row_text("advance", 10_000, out, 55.0, 512)
    assert label == "advance (advance_run), 10,000 events"
    assert "rss+ 6.8 / py 11.7 MB over 3 calls" in figures
    assert "cold 55 + 11.7 = 67 of 512 MB = 0.13 (<= half)" in figures
    _, over = bm.row_text("fanout", 1000, {**out, "py_mb": 200.0}, 55.0, 256)
    assert "OVER half" in over
    _, missing = bm.row_text("fork", 100_000, {"error": "more than 900 s"}, 55.0, 512)
    assert missing == "not measured: more than 900 s"


def test_the_clients_follow_the_functions_grants():
    assert bm.services_of(manifest.function("advance_run")) == ["dynamodb", "s3", "secretsmanager"]
    assert "sqs" in bm.services_of(manifest.function("fanout_webhooks"))
    assert bm.services_of(manifest.function("get_ui")) == []


PROBED = f"""
import json
from bench import bench_memory as bm

probe = bm._Probe("advance_run")
with probe("openwop-advance-run", {{}}):  # not armed: not measured
    pass
probe.armed = True
with probe("openwop-fanout-webhooks", {{}}):  # another function: not measured
    pass
with probe("openwop-advance-run", {{"runId": "{RUN}"}}):
    held = bytearray(8 * 2**20)
del held
print(json.dumps([probe.calls, probe.py_bytes]))
"""


def test_the_probe_measures_only_its_target_while_armed():
    # In a fresh interpreter, as the bench runs it: the probe starts and stops tracemalloc, and stopping it while
    # another thread allocates can crash CPython 3.11 (this suite's processes run local stacks' threads)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", PROBED], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    calls, py_bytes = json.loads(done.stdout.strip().splitlines()[-1])
    assert calls == 1
    assert py_bytes >= 8 * 2**20


def test_a_bare_interpreter_is_measured_in_a_fresh_process():
    assert 1 < bm.interpreter_mb() < 200


def test_the_first_request_takes_a_get_route_and_fills_its_parameters():
    routes = [r for r in ROUTES if r.function == "get_run"]
    route = fr.pick_route(routes)
    assert (route.method, route.path) == ("GET", "/runs/{runId}")
    assert fr.fill_path(route.path, {"runId": RUN}) == "/runs/bench~2Fr-01JABCDEFGHJKMNPQRSTVWXYZ0"
    assert fr.fill_path("/a/{gatewayId}/{rest+}", {}) == f"/a/{fr.PLACEHOLDER}/{fr.PLACEHOLDER}"
    streaming = [r for r in ROUTES if r.function == "stream_run_events"]
    assert fr.pick_route(streaming).path == "/runs/{runId}/events"  # its only route


def test_the_best_of_fresh_interpreters_is_each_figures_minimum():
    samples = [
        {"import": 80.0, "first": 300.0, "second": 4.0, "status": 200},
        {"import": 70.0, "first": 320.0, "second": 3.0, "status": 200},
    ]
    assert fr.best(samples) == {"import": 70.0, "first": 300.0, "second": 3.0, "status": 200}
