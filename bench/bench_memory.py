"""Memory of the task functions (issue 38, item 7), and of the API functions that hold a request (SSE, long poll:
billed for the whole time they hold, decision 0193): the peak a function holds while it works, at 1k, 10k and 100k
events, against its configured memory (``shared.manifest``: ``Function.memory_mb``).

Run: ``.venv/bin/python -m bench.bench_memory`` (part of ``make bench``). ``BENCH_MEMORY_EVENTS`` sets the sizes
(default ``1000,10000``; a 100,000-event row takes 1 (fan-out) to 12 minutes (fork) on 2 cores: set
``BENCH_MEMORY_EVENTS=1000,10000,100000`` for them), ``BENCH_MEMORY_ROLES`` the rows (default
``advance,fork,branch,trial,fanout,watch,poll``). Prints figures; asserts nothing.

Each row is one **fresh interpreter** (``python -m bench.bench_memory probe ROLE EVENTS``, the functions'
environment) that starts the local stack (moto in-process), builds what the function works on through the real path,
and measures every invocation of the function:

- ``advance``: ``advance_run`` advancing a live run to EVENTS events (a loop of noop nodes, as ``bench.bench_scale``);
- ``fork``: ``advance_run`` re-executing a replay fork (from 0) of such a run (only the fork's tasks);
- ``branch``: ``advance_run`` copying the prefix of a branch fork from half of such a run (tasks of up to
  ``forkindex.COPY_EVENTS`` events each) and going on live (only the fork's tasks);
- ``trial``: ``run_eval_trial`` running one eval trial whose scripted agent makes EVENTS / 10 tool calls;
- ``fanout``: ``fanout_webhooks`` fanning out the stream batches of such a live run, one subscription registered;
- ``watch``: ``stream_run_events`` (an API function: SSE) streaming such a run, once it ended, from its start to its
  end, body after body as a client resuming with ``Last-Event-ID`` reads it;
- ``poll``: ``poll_run_events`` (an API function: a long poll) reading such a run, once it ended, page after page
  (``afterSequence`` the last sequence answered) to its end.

moto's storage lives in the same process, so the process's peak resident set (``VmHWM``, printed, "process") is the stack and the
build, not the function. Two figures are the function's own, per invocation, with every Lambda invocation of the
process run one at a time (on AWS each has its own container): **rss+** is the resident set's rise during the call
(``/proc/self/clear_refs`` resets the peak at the call's start; the peak after it minus the resident set before it),
**py** is the call's ``tracemalloc`` peak above what was traced at its start (Python allocations of the window, moto's
copy of what the call writes included; tracing starts at the first call and is never stopped). Both are the maximum over the function's invocations. The estimate checked against the configured size is
the function's cold footprint — a fresh interpreter's peak resident set (``VmHWM``) after importing the handler module and building
the boto3 clients its manifest grants name (the probe's rises are measured with those already loaded) — plus the
larger of the two rises; the bare interpreter's is printed beside it.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

ROLES: dict[str, str] = {
    "advance": "advance_run",
    "fork": "advance_run",
    "branch": "advance_run",
    "trial": "run_eval_trial",
    "fanout": "fanout_webhooks",
    "watch": "stream_run_events",
    "poll": "poll_run_events",
}
ROW_TIMEOUT_S = 1800  # a row that takes longer is reported as such, not waited on


def functions_env() -> dict[str, str]:
    """The functions' environment (infra/constructs/functions.py): no pydantic plugin scan."""
    return {**os.environ, "PYDANTIC_DISABLE_PLUGINS": "__all__", "POWERTOOLS_LOG_LEVEL": "WARNING"}


def status_kb(text: str, key: str) -> int:
    """A ``kB`` figure of ``/proc/<pid>/status`` (``VmRSS``, ``VmHWM``): 0 when absent."""
    for row in text.splitlines():
        if row.startswith(key + ":"):
            return int(row.split()[1])
    return 0


def verdict(estimate_mb: float, memory_mb: int) -> tuple[float, bool]:
    """(estimate / configured, whether the estimate is at most half the configured size)."""
    return estimate_mb / memory_mb, estimate_mb <= memory_mb / 2


def row_text(role: str, events: int, out: dict[str, Any], import_mb: float, memory_mb: int) -> tuple[str, str]:
    """The printed row of one probe's answer: (label, figures)."""
    label = f"{role} ({ROLES[role]}), {events:,} events"
    if "error" in out:
        return label, f"not measured: {out['error']}"
    own = max(out["rss_mb"], out["py_mb"])
    estimate = import_mb + own
    ratio, ok = verdict(estimate, memory_mb)
    return label, (
        f"rss+ {out['rss_mb']:.1f} / py {out['py_mb']:.1f} MB over {out['calls']} calls; "
        f"cold {import_mb:.0f} + {own:.1f} = {estimate:.0f} of {memory_mb} MB = {ratio:.2f} "
        f"({'<= half' if ok else 'OVER half'}); process {out['process_mb']:.0f} MB, {out['seconds']:.0f} s"
    )


# -- the probe (one fresh interpreter per row) ------------------------------------------------------------------------


def _status() -> str:
    with open("/proc/self/status") as f:
        return f.read()


class _Probe:
    """An invocation observer: every Lambda invocation of the process one at a time; the target's measured."""

    def __init__(self, target: str) -> None:
        from bench.common import _function

        self._function = _function
        self.target = target
        self.armed = False
        self.lock = threading.RLock()
        self.rss_kb = 0
        self.py_bytes = 0
        self.calls = 0

    @contextmanager
    def __call__(self, function_name: str, event: Any) -> Iterator[None]:
        with self.lock:
            f = self._function(function_name)
            if not self.armed or f is None or f.name != self.target:
                yield
                return
            gc.collect()
            before = status_kb(_status(), "VmRSS")
            with open("/proc/self/clear_refs", "w") as c:
                c.write("5")  # the peak resident set starts again from the current one
            if not tracemalloc.is_tracing():  # started once, never stopped: a stop while another thread
                tracemalloc.start()  # allocates (the stack's) can crash CPython 3.11
            held, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            try:
                yield
            finally:
                _, peak = tracemalloc.get_traced_memory()
                self.rss_kb = max(self.rss_kb, status_kb(_status(), "VmHWM") - before)
                self.py_bytes = max(self.py_bytes, peak - held)
                self.calls += 1


def _loop(ports: Any, events: int) -> str:
    from bench.bench_scale import _create, register_loop
    from bench.common import wait_status, wait_streams

    register_loop(ports, "bench-memory-loop", events)
    run_id = _create({"workflowId": "bench-memory-loop"})
    wait_status(ports, run_id, timeout=ROW_TIMEOUT_S)
    wait_streams(time.monotonic() + ROW_TIMEOUT_S)  # the fan-out of its last pages
    return run_id


def _fork(ports: Any, run_id: str, mode: str = "replay") -> None:
    """A replay fork from 0 of the run, or a branch from half of it (its prefix copied by tasks of up to
    ``forkindex.COPY_EVENTS`` events)."""
    from bench.common import api_event, call, wait_status

    wire = run_id.replace("/", "~2F")
    from_seq = 0 if mode == "replay" else (ports.runs.get_run(run_id).last_seq + 1) // 2
    out = call(
        "run_actions", api_event("POST", f"/runs/{wire}:fork", "/runs/{runId}", {"mode": mode, "fromSeq": from_seq})
    )
    wait_status(ports, str(json.loads(out["body"])["runId"]), timeout=ROW_TIMEOUT_S)


def _watch(watch: _Probe, run_id: str) -> None:
    """Stream the run's whole log through ``stream_run_events``, body after body (``Last-Event-ID`` the last id sent),
    each invocation measured."""
    from bench.common import api_event, call

    wire, last = run_id.replace("/", "~2F"), "-1"
    for _ in range(100_000):
        event = api_event("GET", f"/runs/{wire}/events", "/runs/{runId}/events")
        event["headers"]["last-event-id"] = last
        with watch("stream_run_events", event):
            out = call("stream_run_events", event)
        assert out["statusCode"] == 200, out["body"][:300]
        ids = [row[4:] for row in out["body"].splitlines() if row.startswith("id: ")]
        last = ids[-1] if ids else last
        if out["headers"].get("x-openwop-stream") == "end":
            return
    raise AssertionError("the stream never ended")


def _poll(watch: _Probe, run_id: str) -> None:
    """Read the run's whole log through ``poll_run_events``, page after page, each invocation measured."""
    from bench.common import api_event, call

    wire, after = run_id.replace("/", "~2F"), -1
    for _ in range(100_000):
        query = f"afterSequence={after}&timeout=1" if after >= 0 else "timeout=1"
        event = api_event("GET", f"/runs/{wire}/events/poll", "/runs/{runId}/events/poll", query=query)
        with watch("poll_run_events", event):
            out = call("poll_run_events", event)
        assert out["statusCode"] == 200, out["body"][:300]
        page = json.loads(out["body"])
        after = int(page["lastSequence"])
        if page["isTerminal"]:
            return
    raise AssertionError("the log never ended")


def _trial(aws: Any, ports: Any, calls: int) -> None:
    from bench.bench_eval import _wait
    from bench.common import TENANT, api_event, call
    from shared.services import suites

    task = {
        "taskId": "task-00000",
        "input": {"calls": [{"tool": "conformance.eval:echo", "args": {"i": i}} for i in range(calls)], "answer": "a"},
        "expected": {"kind": "golden", "match": {"strategy": "exact", "value": "a"}},
        "fixtures": {
            "toolResponses": [
                {"tool": "conformance.eval:counter", "args": {"op": "inc", "key": "k"}, "response": {"count": 1}}
            ],
            "onMiss": "live",
        },
    }
    suite = {
        "suiteId": "bench.local.evals.memory",
        "version": "1.0.0",
        "modes": ["golden"],
        "trials": 1,
        "tasks": [task],
    }
    suites.register(ports, TENANT, suite)
    body = {"mode": "eval", "evalSuiteRef": "bench.local.evals.memory@1.0.0", "agentId": "conformance-eval-agent"}
    out = call("create_run", api_event("POST", "/runs", "/runs", body))
    assert out["statusCode"] == 201, out["body"][:300]
    _wait(aws, str(json.loads(out["body"])["runId"]), timeout=ROW_TIMEOUT_S)


def probe(role: str, events: int) -> dict[str, Any]:
    """Build and measure one row in this interpreter (see the module docstring); the figures as a dict."""
    calls = max(10, events // 10)
    os.environ["RUN_TOOL_CALL_BUDGET"] = str(max(1000, calls))
    logging.getLogger("moto").setLevel(logging.CRITICAL)
    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
    from bench.common import API_KEY, TENANT, api_event, call
    from shared.local.lambda_registry import observe_invocations
    from shared.local.stack import LocalAws
    from shared.services.seed import seed_host
    from shared.wiring import get_ports

    aws = LocalAws()
    aws.start()
    receiver: Any = None
    started = time.monotonic()
    try:
        aws.bootstrap()
        ports = get_ports()
        seed_host({API_KEY: TENANT}, ports)
        watch = _Probe(ROLES[role])
        remove = observe_invocations(watch)
        if role == "fanout":
            from shared.cli.webhook_receiver import WebhookReceiver

            receiver = WebhookReceiver()
            receiver.start()
            sub = {"url": receiver.url + "/bench", "events": ["run.started", "run.completed"]}
            reg = call("manage_webhooks", api_event("POST", "/webhooks", "/webhooks", sub))
            assert reg["statusCode"] == 201, reg["body"][:300]
        watch.armed = role in ("advance", "fanout")
        if role == "trial":
            watch.armed = True
            _trial(aws, ports, calls)
        else:
            run_id = _loop(ports, events)
            if role in ("watch", "poll"):
                watch.armed = True
                (_watch if role == "watch" else _poll)(watch, run_id)
            if role in ("fork", "branch"):
                watch.armed = True
                _fork(ports, run_id, "replay" if role == "fork" else "branch")
        watch.armed = False
        with watch.lock:  # a measured invocation may still be returning after its run's status turned terminal
            remove()
        return {
            "role": role,
            "events": events,
            "calls": watch.calls,
            "rss_mb": watch.rss_kb / 1024,
            "py_mb": watch.py_bytes / 2**20,
            "process_mb": status_kb(_status(), "VmHWM") / 1024,
            "seconds": time.monotonic() - started,
        }
    finally:
        if receiver is not None:
            receiver.stop()
        aws.stop()


# -- the bench ----------------------------------------------------------------------------------------------------


def services_of(fn: Any) -> list[str]:
    """The AWS services whose clients ``fn`` builds, from its manifest grants (``shared.wiring`` builds them)."""
    named = [
        ("dynamodb", bool(fn.tables)),
        ("s3", fn.bucket is not None),
        ("stepfunctions", bool(fn.starts or fn.resumes)),
        ("sqs", bool(fn.sends)),
        ("secretsmanager", bool(fn.secrets or fn.credentials or fn.tables)),  # the tombstone key of the runs table
        ("kms", bool(fn.keys)),
    ]
    return [service for service, used in named if used]


def interpreter_mb(module: str = "", services: tuple[str, ...] = ()) -> float:
    """The peak resident set (MB, ``VmHWM``) of a fresh interpreter with the functions' environment after importing
    ``module`` and building a boto3 client of each of ``services`` (none: a bare interpreter). Not ``ru_maxrss``:
    Linux carries it over from the process that started the interpreter (a 700 MB test worker's child read 734 MB)."""
    code = (f"import {module}; " if module else "") + "import re; "
    if services:
        code += "import boto3; " + "".join(f"boto3.client({s!r}, region_name='us-east-1'); " for s in services)
    code += "print(re.search(r'VmHWM:\\s*(\\d+)', open('/proc/self/status').read()).group(1))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=functions_env())
    return int(out.stdout.split()[-1]) / 1024


def run_probe(role: str, events: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.bench_memory", "probe", role, str(events)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env=functions_env(), timeout=ROW_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"error": f"more than {ROW_TIMEOUT_S} s"}
    lines = [x for x in out.stdout.splitlines() if x.startswith("{")]
    if out.returncode or not lines:
        return {"error": (out.stderr.strip().splitlines() or ["no answer"])[-1][:200]}
    answer: dict[str, Any] = json.loads(lines[-1])
    return answer


def main() -> None:
    from bench.common import line
    from shared import manifest

    sizes = [int(x) for x in os.environ.get("BENCH_MEMORY_EVENTS", "1000,10000").split(",") if x]
    roles = [r for r in os.environ.get("BENCH_MEMORY_ROLES", ",".join(ROLES)).split(",") if r in ROLES]
    print(
        "Functions' peak memory, the task functions' and the held requests' (a fresh interpreter per row; rss+ = "
        "resident set's rise during the call, py = its tracemalloc peak, both the max over the function's calls; "
        "estimate = import and clients + the larger)"
    )
    line("bare interpreter (VmHWM)", f"{interpreter_mb():.1f}", "MB")
    imports = {}
    for name in sorted(set(ROLES[r] for r in roles)):
        f = manifest.function(name)
        services = tuple(services_of(f))
        imports[name] = interpreter_mb(f.module, services)
        line(
            f"{name}: import + clients (VmHWM)",
            f"{imports[name]:.1f}",
            f"MB (its module and {', '.join(services)} clients; configured {f.memory_mb} MB)",
        )
    for events in sizes:
        for role in roles:
            name = ROLES[role]
            label, figures = row_text(
                role, events, run_probe(role, events), imports[name], manifest.function(name).memory_mb
            )
            line(label, figures)


if __name__ == "__main__":
    if sys.argv[1:2] == ["probe"]:
        print(json.dumps(probe(sys.argv[2], int(sys.argv[3]))), flush=True)
    else:
        main()
