"""Small test-only helpers: unique ids, execution polling, and a module-backed Lambda handler for canaries."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

TERMINAL = ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")


def unique(prefix: str) -> str:
    """A fresh name so tests never share data (DynamoDB keys, function and state machine names)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def wait_for_execution(sfn: Any, execution_arn: str, timeout: float = 60.0) -> dict[str, Any]:
    """Poll ``describe_execution`` until the execution leaves RUNNING; fail the test on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        described: dict[str, Any] = sfn.describe_execution(executionArn=execution_arn)
        if described["status"] in TERMINAL:
            return described
        if time.monotonic() > deadline:
            raise AssertionError(f"execution still {described['status']} after {timeout}s: {execution_arn}")
        time.sleep(0.05)


def eventually(check: Any, timeout: float = 30.0, interval: float = 0.05) -> Any:
    """Poll ``check()`` until it returns a truthy value; fail the test on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
    """Used as a manifest function module by the Lambda registry canary (imported lazily by the patch)."""
    return {
        "echo": event,
        "functionName": context.function_name,
        "requestId": context.aws_request_id,
        "memory": context.memory_limit_in_mb,
        "remainingMs": context.get_remaining_time_in_millis(),
    }


def ports() -> Any:
    """The ports of this process (the local stack's, once ``local_aws`` is up)."""
    from shared.wiring import get_ports

    return get_ports()


class ServeProcess:
    """``openwop-serverless serve ARGS`` in a subprocess (as ``make serve`` runs it, from the checkout), stdout read
    line by line; stderr kept in ``tmp_path/<name>.stderr``. ``start()`` waits until it serves (or exits)."""

    def __init__(
        self, tmp_path: Any, *args: str, name: str = "serve", env: dict[str, str] | None = None, cwd: Any = None
    ) -> None:
        import os
        from pathlib import Path

        self.root = Path(__file__).resolve().parents[1]
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("AWS_", "MOTO_", "OPENWOP_", "EGRESS_")) and not k.endswith(("_TABLE", "_BUCKET"))
        }
        # faulthandler: a host sent SIGABRT (it did not stop) writes every thread's stack to its stderr
        self.env = {**base, "PYTHONPATH": str(self.root), "PYTHONFAULTHANDLER": "1", **(env or {})}
        self.args = args
        self.cwd = Path(cwd) if cwd is not None else self.root
        self.stderr_path = Path(tmp_path) / f"{name}.stderr"
        self.lines: list[str] = []
        self.proc: Any = None

    def start(self, timeout: float = 120) -> ServeProcess:
        import subprocess
        import sys
        import threading

        errors = self.stderr_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "shared.local.commands", "serve", *self.args],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
        errors.close()
        threading.Thread(target=lambda: self.lines.extend(self.proc.stdout or []), daemon=True).start()
        eventually(lambda: self.serving or self.proc.poll() is not None, timeout=timeout, interval=0.1)
        return self

    @property
    def serving(self) -> bool:
        return any("Ctrl-C" in line for line in self.lines)

    @property
    def out(self) -> str:
        return "".join(self.lines)

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text()

    @property
    def exports(self) -> dict[str, str]:
        """The environment the printed ``export ...`` line gives a newcomer's shell."""
        exports = next(line for line in self.lines if line.startswith("export "))
        return dict(pair.partition("=")[::2] for pair in exports.split()[1:])

    @property
    def base_url(self) -> str:
        return self.exports["OPENWOP_BASE_URL"]

    def wait(self, timeout: float = 120) -> int:
        code: int = self.proc.wait(timeout=timeout)
        return code

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        self.proc.kill()
        self.proc.wait(timeout=30)

    def stop(self) -> int:
        """SIGTERM, as Ctrl-C; the exit code. A host still stopping after 60 s is asked where its threads are
        (SIGUSR1: faulthandler writes their stacks to its stderr), and the test is warned with them; one not stopped
        after 3 minutes is sent SIGABRT (the stacks again, then the end) and the test fails with its stderr."""
        import signal
        import subprocess
        import warnings

        self.proc.terminate()
        try:
            return self.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGUSR1)
        try:
            code = self.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGABRT)
            try:
                self.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.wait(timeout=30)
            raise AssertionError(
                f"the host did not stop within 3 minutes of SIGTERM:\n{self.stderr[-16000:]}"
            ) from None
        warnings.warn(f"the host took over 60 s to stop; its threads then:\n{self.stderr[-16000:]}", stacklevel=2)
        return code


@contextmanager
def setting(name: str, value: str) -> Iterator[None]:
    """A runtime setting's environment variable for the block (the local host's functions read settings afresh
    once the cache is cleared), then as it was."""
    import os

    from shared.settings import get_settings

    saved = os.environ.get(name)
    os.environ[name] = value
    get_settings.cache_clear()
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved
        get_settings.cache_clear()


@contextmanager
def local_serve(tmp_path: Any) -> Iterator[dict[str, str]]:
    """``openwop-serverless serve`` on a free port in a subprocess (as ``make serve`` runs it, its state kept in a
    folder of ``tmp_path``), yielding the environment its printed ``export ...`` line gives a newcomer's shell;
    stopped on exit."""
    from pathlib import Path

    serve = ServeProcess(tmp_path, "--port", "0", "--data-dir", str(Path(tmp_path) / "openwop-state"))
    try:
        serve.start(timeout=120)
        assert serve.serving, serve.stderr[-3000:]
        yield {**serve.env, **serve.exports}
    finally:
        if serve.proc is not None and serve.proc.poll() is None:
            serve.stop()


@contextmanager
def hooked(client: Any, handlers: dict[str, Any]) -> Iterator[None]:
    """``client``'s botocore event handlers (event name -> handler), registered while inside."""
    for event, handler in handlers.items():
        client.meta.events.register(event, handler)
    try:
        yield
    finally:
        for event, handler in handlers.items():
            client.meta.events.unregister(event, handler)


@contextmanager
def lagging_queries(client: Any, hidden: Callable[[dict[str, Any]], bool]) -> Iterator[None]:
    """While inside, an eventually consistent Query ``client`` sends does not show the items ``hidden`` picks (a
    replica behind their writes); a strongly consistent one shows them all."""
    local = threading.local()

    def mark(params: Any = None, **_: Any) -> None:
        local.consistent = bool(params.get("ConsistentRead"))

    def lag(parsed: Any = None, model: Any = None, **_: Any) -> None:
        if model.name == "Query" and isinstance(parsed, dict) and not getattr(local, "consistent", True):
            parsed["Items"] = [i for i in parsed.get("Items") or [] if not hidden(i)]

    with hooked(client, {"before-parameter-build.dynamodb.Query": mark, "after-call.dynamodb.Query": lag}):
        yield


@contextmanager
def requests_sent(client: Any, operation: str, table: str | None = None) -> Iterator[list[dict[str, Any]]]:
    """The parameters of every ``operation`` request (e.g. ``Query``) ``client`` sends while inside, whatever thread
    sends it (a botocore hook on a DynamoDB client); with ``table``, only the requests to that table (the client is
    shared: the local stream's fan-out may read another table from its own thread meanwhile)."""
    sent: list[dict[str, Any]] = []

    def capture(params: Any = None, **_: Any) -> None:
        if table is None or params.get("TableName") == table:
            sent.append(dict(params))

    with hooked(client, {f"before-parameter-build.dynamodb.{operation}": capture}):
        yield sent


class OwnCalls:
    """The requests one call makes on a client (``run``), on its own thread and on the workers it starts
    (``shared.services.common.parallel`` runs each in a copy of its caller's context): not those of other threads
    sharing the client meanwhile (a module's host still finishing an earlier test's runs, giving back their slots).
    ``calls`` holds (service:operation, parameters) in the order sent."""

    def __init__(self) -> None:
        import threading

        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        import contextvars

        def marked() -> Any:
            _MEASURING.set(self)
            return fn(*args, **kwargs)

        return contextvars.copy_context().run(marked)

    def counts(self) -> dict[str, int]:
        from collections import Counter

        return dict(Counter(name for name, _ in self.calls))


def _measuring() -> Any:
    import contextvars

    return contextvars.ContextVar("measuring", default=None)


_MEASURING = _measuring()


@contextmanager
def own_calls(client: Any) -> Iterator[OwnCalls]:
    """Counts what ``OwnCalls.run`` sends through ``client`` while inside (a botocore hook on every operation, with
    its parameters as the caller gave them)."""
    measure = OwnCalls()

    def capture(model: Any = None, params: Any = None, **_: Any) -> None:
        if _MEASURING.get() is measure:
            with measure.lock:
                measure.calls.append((f"{model.service_model.endpoint_prefix}:{model.name}", dict(params or {})))

    client.meta.events.register("before-parameter-build.*.*", capture)
    try:
        yield measure
    finally:
        client.meta.events.unregister("before-parameter-build.*.*", capture)


class FakeTimer:
    """A monotonic clock a test moves by hand (``timer.now += 61``)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def readme_python_blocks(heading: str) -> list[str]:
    """The ```python blocks of the README section under ``## heading``, as a newcomer copies them."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = text.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def stored_run(
    ports: Any,
    prefix: str,
    status: str = "running",
    *,
    tenant: str = "tenant-c",
    data: dict[str, Any] | None = None,
    task_stamp: str | None = None,
) -> Any:
    """A workflow run of ``tenant`` created straight in the run store (no execution; ``data`` added to its creation
    facts; ``task_stamp`` on its run item), owned as an API caller's run is (a listing of the tenant's runs shows it
    whole): for tests of its stored log."""
    from shared.ports import RunRecord
    from shared.services.common import Caller

    rec = RunRecord(
        run_id=f"{tenant}/{unique(prefix)}",
        tenant=tenant,
        status=status,
        last_seq=-1,
        created_at=ports.clock.iso(),
        data={"kind": "workflow", "owner": Caller(tenant, "tests").owner, **(data or {})},
        expires_at=ports.clock.now_ms() // 1000 + 3600,
        task_stamp=task_stamp,
    )
    ports.runs.create_run(rec)
    return rec


def execution_started(ports: Any, run_id: str) -> bool:
    """Whether the run's execution was started: Step Functions has the execution its run item names (a create stores
    the ARN its start will give it, decision 0175; a run that waits for a slot has none yet)."""
    rec = ports.runs.get_run(run_id)
    if rec is None or not rec.execution_arn:
        return False
    client = ports.orchestrator._c
    try:
        client.describe_execution(executionArn=rec.execution_arn)
    except client.exceptions.ExecutionDoesNotExist:
        return False
    return True


def naming(sent: list[dict[str, Any]], value: str) -> list[dict[str, Any]]:
    """The requests ``requests_sent`` captured that name ``value`` (a run id): the client is shared, and another
    test's run, erasure or fan-out may still be working on other threads."""
    import json

    return [params for params in sent if json.dumps(value) in json.dumps(params, default=str)]


def derived_copies(ports: Any, eval_run_id: str) -> dict[str, list[dict[str, Any]]]:
    """The derived fixture copies an eval run's plan item names, per taskId, read whole (empty when it used none, or
    has no plan item: erased, or a fork); a copy that is gone raises ``EvalRecordedFixturesGoneError``."""
    from shared import keys
    from shared.errors import EvalRecordedFixturesGoneError

    plan = ports.runs.get_aux(eval_run_id, keys.EVAL_PLAN_SK)
    out: dict[str, list[dict[str, Any]]] = {}
    for task_id, key in ((plan or {}).get("derived") or {}).items():
        copy = ports.blobs.get_json(str(key))
        if copy is None:
            raise EvalRecordedFixturesGoneError()
        out[str(task_id)] = list(copy["entries"])
    return out
