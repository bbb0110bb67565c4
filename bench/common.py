"""Bench plumbing: the embedded stack, an exact AWS request and byte meter, in-process handler calls.

How the meter counts (exactly, whatever the thread):

- **Where**: at the botocore boundary of the clients our ports use (``shared.wiring`` builds them; the bench hooks
  each one's event system once). ``before-send`` fires once per HTTP attempt (retries included: AWS sees, and
  for most services bills, every attempt) and gives the request body; ``response-received`` fires once per attempt
  and gives the response body (or its ``Content-Length`` when streamed, as an S3 ``GetObject``). So a figure is
  *requests* (HTTP attempts) and *bytes sent / received* (bodies, not headers), per ``service:Operation``.
- **Whose**: every request is attributed to an *origin*, read from a context variable at the moment it is sent (a
  thread started by ``shared.services.common.parallel`` runs in a copy of its starter's context: its origin). The
  bench sets the origin of its own thread (``meter.origin("create")`` around an API call; ``"poll"`` while
  ``wait_status`` polls; ``"bench"`` otherwise). Work done on other threads — Step Functions tasks, async invokes
  and DynamoDB stream batches, which moto runs on its own threads — enters through the local Lambda invoke
  (``shared.local.lambda_registry.invoke_target``), where the meter's observer sets the thread's origin to the run the
  invocation works for (the first run id found in its event, e.g. ``{"runId": ...}`` or an eval trial's item),
  or ``lambda:<function>`` when the event names no run. A figure for "one operation" is the sum of the origins
  that are that operation's work: the API call's tag plus the run(s) it caused (``meter.usage("create", run_id)``).
  Nothing is paused and nothing is dropped: polling is simply another origin, left out of the sum.
- **When**: ``wait_status`` returns only once the run is terminal, its Step Functions execution has ended
  (checked through a client the meter does not watch) and the stream consumers are idle, so no task of the run
  and no fan-out of its events is still sending when the bench reads its counts (a stream batch or an SQS
  message is attributed to the first run id in it: the bench runs one operation at a time); ``unattributed()`` reports requests from origins the bench did not ask about, so a payload
  change that hides a run id shows up as a number rather than vanishing.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from bench.trueunits import item_kb

# the handlers' Powertools loggers would print every refused request of the fuzz pass
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

API_KEY = "bench-key-aaaaaaaaaaaaaaaa"
TENANT = "bench"
POLL = "poll"
BENCH = "bench"


@dataclass
class Usage:
    """AWS requests (HTTP attempts) and body bytes, by ``service:Operation``; DynamoDB request units (``wru``,
    ``rru``); Lambda invocations by function and their GB-seconds; Step Functions state transitions."""

    calls: Counter[str] = field(default_factory=Counter)
    sent: Counter[str] = field(default_factory=Counter)
    received: Counter[str] = field(default_factory=Counter)
    units: Counter[str] = field(default_factory=Counter)
    invocations: Counter[str] = field(default_factory=Counter)
    gb_seconds: float = 0.0
    transitions: int = 0

    def total(self) -> int:
        return sum(self.calls.values())

    def bytes_sent(self) -> int:
        return sum(self.sent.values())

    def bytes_received(self) -> int:
        return sum(self.received.values())

    def add(self, other: Usage) -> Usage:
        for mine, theirs in self._counters(other):
            mine.update(theirs)
        self.gb_seconds += other.gb_seconds
        self.transitions += other.transitions
        return self

    def minus(self, other: Usage) -> Usage:
        out = Usage().add(self)
        for mine, theirs in out._counters(other):
            mine.subtract(theirs)
        out.gb_seconds -= other.gb_seconds
        out.transitions -= other.transitions
        return out

    def scaled(self, factor: float) -> dict[str, float]:
        """The usage's billable quantities times ``factor`` (for per-unit figures)."""
        return {
            "requests": self.total() * factor,
            "wru": self.units["wru"] * factor,
            "rru": self.units["rru"] * factor,
            "invocations": sum(self.invocations.values()) * factor,
            "gb_seconds": self.gb_seconds * factor,
            "transitions": self.transitions * factor,
        }

    def _counters(self, other: Usage) -> list[tuple[Counter[str], Counter[str]]]:
        return [
            (self.calls, other.calls),
            (self.sent, other.sent),
            (self.received, other.received),
            (self.units, other.units),
            (self.invocations, other.invocations),
        ]

    def units_by_operation(self) -> dict[str, float]:
        """Write and read units by ``service:Operation`` (``"wru dynamodb:TransactWriteItems"``), most first."""
        return {k: v for k, v in self.units.most_common() if " " in k and v}

    def top(self, n: int = 6) -> dict[str, int]:
        return dict(self.calls.most_common(n))


def _run_id_in(event: Any, budget: int = 200) -> str | None:
    """The first run id found in an invocation event (breadth first, a bounded number of nodes)."""
    from shared.protocol.ids import is_run_id

    queue: list[Any] = [event]
    while queue and budget > 0:
        node = queue.pop(0)
        budget -= 1
        if isinstance(node, dict):
            for key in ("runId", "r", "pk"):
                value = node.get(key)
                if isinstance(value, dict):  # a stream record's key: {"S": "<runId>"}
                    value = value.get("S")
                if is_run_id(value):
                    return str(value)
            body = node.get("body")
            if isinstance(body, str) and body.startswith("{"):  # an SQS record: its message body names the run
                queue.append(_json_body(body))
            queue.extend(v for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            queue.extend(v for v in node[:20] if isinstance(v, dict | list))
    return None


def _function(function_name: str) -> Any:
    from shared import manifest

    for f in manifest.FUNCTIONS:
        if function_name in (f.name, f.local_name):
            return f
    return None


def _memory_mb(function_name: str) -> int:
    f = _function(function_name)
    return int(f.memory_mb) if f is not None else 128


def _json_body(body: Any) -> dict[str, Any]:
    try:
        out = json.loads(body) if isinstance(body, bytes | str) and body else {}
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


_DDB_READS = {
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:Scan",
    "dynamodb:BatchGetItem",
    "dynamodb:TransactGetItems",
}


def _write_units(op: str, params: dict[str, Any]) -> int:
    """Write request units of one DynamoDB write request, from its body: a put's item; an update's values (it is
    billed on the larger of its item before and after, unknown here: ``bench.trueunits.TrueUnits`` reads them)."""
    if op == "dynamodb:PutItem":
        return item_kb(params.get("Item"), 1024)
    if op in ("dynamodb:UpdateItem", "dynamodb:DeleteItem"):
        return item_kb(params.get("ExpressionAttributeValues"), 1024)
    if op == "dynamodb:TransactWriteItems":
        total = 0
        for entry in params.get("TransactItems") or []:
            for kind, spec in entry.items():
                total += 2 * (
                    item_kb(spec.get("Item") or spec.get("ExpressionAttributeValues"), 1024)
                    if kind != "ConditionCheck"
                    else 1
                )
        return total
    if op == "dynamodb:BatchWriteItem":
        return sum(
            item_kb((r.get("PutRequest") or {}).get("Item"), 1024)
            for reqs in (params.get("RequestItems") or {}).values()
            for r in reqs
        )
    return 0


def _read_factor(op: str, params: dict[str, Any]) -> float:
    """Read request units per 4 KB read: 1 strongly consistent, 0.5 eventually consistent, 2 transactional."""
    if op not in _DDB_READS:
        return 0.0
    if op == "dynamodb:TransactGetItems":
        return 2.0
    if op == "dynamodb:BatchGetItem":
        tables = (params.get("RequestItems") or {}).values()
        return 1.0 if any(t.get("ConsistentRead") for t in tables) else 0.5
    return 1.0 if params.get("ConsistentRead") else 0.5


def _read_units(op: str, factor: float, body: Any) -> float:
    """Read request units of one DynamoDB read: the items returned, per 4 KB (a Query or Scan is billed on the
    total size read, rounded up once; a GetItem that finds nothing still costs one unit)."""
    if not factor:
        return 0.0
    data = _json_body(body)
    if op == "dynamodb:GetItem":
        return factor * item_kb(data.get("Item"), 4096)
    if op in ("dynamodb:Query", "dynamodb:Scan"):
        return factor * item_kb(data.get("Items") or [], 4096)
    if op == "dynamodb:TransactGetItems":
        return factor * sum(item_kb(r.get("Item"), 4096) for r in data.get("Responses") or [])
    return factor * sum(item_kb(i, 4096) for items in (data.get("Responses") or {}).values() for i in items)


class AwsMeter:
    """Counts AWS requests and bytes through our ports' clients, per origin (see the module docstring)."""

    def __init__(self, aws: Any = None) -> None:
        self.aws = aws
        self._lock = threading.Lock()
        self._local = threading.local()  # the DynamoDB read factor between a request and its response
        # the origin is a context variable: a thread our code starts through ``common.parallel`` runs in a copy of the
        # starting thread's context, so its requests are that operation's too
        self._origin: contextvars.ContextVar[str] = contextvars.ContextVar(f"origin-{id(self)}", default=BENCH)
        self._by_origin: dict[str, Usage] = {}
        self._remove_observer: Any = None

    # -- wiring ------------------------------------------------------------------------------------------------

    def watch(self, client: Any) -> None:
        client.meta.events.register("before-send.*.*", self._before_send)
        client.meta.events.register("response-received.*.*", self._response_received)

    def observe_invocations(self) -> None:
        from shared.local.lambda_registry import observe_invocations

        self._remove_observer = observe_invocations(self._invocation)

    def close(self) -> None:
        if self._remove_observer is not None:
            self._remove_observer()
            self._remove_observer = None

    # -- origins -----------------------------------------------------------------------------------------------

    def current(self) -> str:
        return self._origin.get()

    @contextmanager
    def origin(self, name: str) -> Iterator[None]:
        token = self._origin.set(name)
        try:
            yield
        finally:
            self._origin.reset(token)

    def _invocation(self, function_name: str, event: Any) -> Any:
        """A stream or queue consumer's invocation is the run's too, under ``<runId>|<function>`` (so its share
        can be read apart: ``usage(f"{run_id}|fanout_webhooks")``); ``usage(run_id)`` includes it."""
        run_id = _run_id_in(event)
        if run_id is None:
            return self.invoked(function_name, f"lambda:{function_name}")
        f = _function(function_name)
        consumer = f is not None and f.kind in ("stream", "queue")
        return self.invoked(function_name, f"{run_id}|{f.name}" if consumer else run_id)

    @contextmanager
    def invoked(self, function_name: str, origin: str | None = None) -> Iterator[None]:
        """One Lambda invocation of ``function_name`` (its local or manifest name), attributed to ``origin`` (the
        current one if None): counted, and its wall time billed as GB-seconds at the function's memory size."""
        memory_mb = _memory_mb(function_name)
        name = origin or self.current()
        started = time.perf_counter()
        with self.origin(name):
            try:
                yield
            finally:
                seconds = time.perf_counter() - started
                with self._lock:
                    usage = self._usage(name)
                    usage.invocations[function_name] += 1
                    usage.gb_seconds += seconds * memory_mb / 1024

    def add_map_children(self, origin: str, children: int, state_entries: int) -> int:
        """Add the state transitions of a Distributed Map's STANDARD child executions, which moto runs inside the
        parent (they have no history of their own here): AWS bills one transition per child execution the Map
        starts, and the child's own states entered (a Task's retry enters it again). ``state_entries`` is counted
        by the caller (the child's Task invocations, retries included)."""
        with self._lock:
            self._usage(origin).transitions += children + state_entries
        return children + state_entries

    def add_run_transitions(self, origin: str, rec: Any) -> int:
        """Add the state transitions of every execution of the run ``rec`` (a ``RunRecord``): a run or a fork has one
        per task, each starting the next, generation after generation, on its machine or its hold machine (decision
        0191), so its generations are read until one was never started; any other run, its stored execution's."""
        from shared.local.environment import run_executions
        from shared.services.start_outbox import machine_of

        machine = machine_of(rec)
        if machine not in ("run", "fork"):
            return self.add_transitions(origin, str(rec.execution_arn))
        sfn = self.aws.client("stepfunctions")

        def described(arn: str) -> dict[str, Any] | None:
            try:
                return dict(sfn.describe_execution(executionArn=arn))
            except sfn.exceptions.ExecutionDoesNotExist:
                return None

        found = run_executions(described, machine, rec.run_id)
        return sum(self.add_transitions(origin, d["executionArn"]) for d in found)

    def add_transitions(self, origin: str, execution_arn: str) -> int:
        """Add the state transitions of a finished Step Functions execution (its ``*StateEntered`` history events,
        read through a client the meter does not watch) to ``origin``."""
        sfn = self.aws.client("stepfunctions")
        kwargs: dict[str, Any] = {"executionArn": execution_arn, "maxResults": 1000}
        entered = 0
        while True:
            page = sfn.get_execution_history(**kwargs)
            entered += sum(1 for e in page["events"] if e["type"].endswith("StateEntered"))
            if not page.get("nextToken"):
                break
            kwargs["nextToken"] = page["nextToken"]
        with self._lock:
            self._usage(origin).transitions += entered
        return entered

    # -- hooks -------------------------------------------------------------------------------------------------

    @staticmethod
    def _op(event_name: str) -> str:
        _, service, operation = event_name.split(".", 2)
        return f"{service}:{operation}"

    @staticmethod
    def _size(body: Any, headers: Any) -> int:
        if isinstance(body, bytes | bytearray | str):
            return len(body)
        try:
            return int((headers or {}).get("content-length") or (headers or {}).get("Content-Length") or 0)
        except (TypeError, ValueError):
            return 0

    def _usage(self, origin: str) -> Usage:
        usage = self._by_origin.get(origin)
        if usage is None:
            usage = self._by_origin[origin] = Usage()
        return usage

    def _before_send(self, request: Any = None, event_name: str = "", **_: Any) -> None:
        body = getattr(request, "body", None)
        op, size = self._op(event_name), self._size(body, getattr(request, "headers", None))
        wru = fifo = 0
        if op.startswith("dynamodb:"):
            params = _json_body(body)
            self._local.ddb_read = _read_factor(op, params)
            wru = _write_units(op, params)
        elif (
            op.startswith("sqs:")
            and isinstance(body, bytes | str)
            and (b".fifo" if isinstance(body, bytes) else ".fifo") in body
        ):  # type: ignore[operator]
            fifo = max(1, -(-size // 65536))  # SQS bills a request per 64 KB of its payload
        with self._lock:
            usage = self._usage(self.current())
            usage.calls[op] += 1
            usage.sent[op] += size
            usage.units["wru"] += wru
            if wru:
                usage.units[f"wru {op}"] += wru  # where the units go (``units_by_operation``)
            usage.units["sqs_fifo"] += fifo
            usage.units["sqs_fifo_requests"] += int(fifo > 0)

    def _response_received(self, response_dict: Any = None, event_name: str = "", **_: Any) -> None:
        if not response_dict:
            return
        op = self._op(event_name)
        size = self._size(response_dict.get("body"), response_dict.get("headers"))
        rru = 0.0
        if op.startswith("dynamodb:") and int(response_dict.get("status_code") or 200) < 300:
            rru = _read_units(op, getattr(self._local, "ddb_read", 0.0), response_dict.get("body"))
        with self._lock:
            usage = self._usage(self.current())
            usage.received[op] += size
            usage.units["rru"] += rru  # type: ignore[assignment]
            if rru:
                usage.units[f"rru {op}"] += rru  # type: ignore[assignment]

    # -- reading -----------------------------------------------------------------------------------------------

    def reset(self) -> None:
        with self._lock:
            self._by_origin.clear()

    def usage(self, *origins: str) -> Usage:
        """The sum of these origins' usage; a run id's includes its stream and queue consumers' (``<runId>|...``)."""
        out = Usage()
        with self._lock:
            for name, used in self._by_origin.items():
                if name in origins or name.split("|", 1)[0] in origins and "|" in name:
                    out.add(used)
        return out

    def origins(self) -> dict[str, int]:
        with self._lock:
            return {o: u.total() for o, u in self._by_origin.items()}

    def unattributed(self, *origins: str) -> int:
        """Requests since the last reset from origins other than these, polling and the bench's own set-up."""
        skip = {*origins, POLL, BENCH}
        return sum(n for o, n in self.origins().items() if o not in skip and o.split("|", 1)[0] not in skip)


@contextmanager
def served_host(api_keys: dict[str, str]) -> Iterator[tuple[Any, str]]:
    """The local stack (moto in-process) and the HTTP front on a free loopback port, with ``api_keys`` (key ->
    tenant) seeded: ``(aws, base_url)``, both stopped when the block ends."""
    logging.getLogger("moto").setLevel(logging.CRITICAL)
    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
    from shared.local.front import LocalFront
    from shared.local.stack import LocalAws
    from shared.services.seed import seed_host
    from shared.wiring import get_ports

    aws = LocalAws()
    aws.start()
    front = LocalFront()
    try:
        aws.bootstrap()
        seed_host(api_keys, get_ports())
        yield aws, front.start("127.0.0.1", 0)
    finally:
        front.stop()
        aws.stop()


def start_stack() -> tuple[Any, AwsMeter]:
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
    global _METER
    meter = _METER = AwsMeter(aws)
    for c in metered_clients(ports):
        meter.watch(c)
    meter.observe_invocations()
    return aws, meter


def metered_clients(ports: Any) -> list[Any]:
    """The AWS clients our ports use (each once), as the meter watches them."""
    clients = {
        id(c.meta.events): c
        for c in (
            ports.runs._c,
            ports.events._c,
            ports.tool_calls._c,  # type: ignore[attr-defined]
            ports.host._c,
            ports.blobs._c,
            ports.orchestrator._c,  # type: ignore[attr-defined]
            *(q._c for q in ports.queues.values()),
        )
    }  # type: ignore[attr-defined]
    secrets = getattr(getattr(ports.secrets, "_client_factory", None), "__self__", None)  # wiring's LazyClient
    if secrets is not None:
        clients[id(secrets.meta.events)] = secrets
    return list(clients.values())


def api_event(method: str, path: str, route: str, body: Any = None, query: str = "") -> dict[str, Any]:
    qs = dict(p.split("=", 1) for p in query.split("&") if p)
    return {
        "version": "2.0",
        "routeKey": f"{method} {route}",
        "rawPath": path,
        "rawQueryString": query,
        "headers": {"authorization": f"Bearer {API_KEY}", "openwop-version": "2.0", "content-type": "application/json"},
        "queryStringParameters": qs or None,
        "requestContext": {
            "http": {
                "method": method,
                "path": path,
                "sourceIp": "127.0.0.1",
                "userAgent": "bench",
                "protocol": "HTTP/1.1",
            },
            "requestId": "bench",
            "stage": "$default",
        },
        "body": json.dumps(body) if body is not None else None,
        "isBase64Encoded": False,
    }


_METER: AwsMeter | None = None


def call(function: str, event: dict[str, Any]) -> dict[str, Any]:
    """Invoke an API function in process, as API Gateway would (metered as one invocation when a stack runs)."""
    from shared.local.front import invoke_in_process

    if _METER is None:
        return dict(invoke_in_process(function, event))
    with _METER.invoked(function):
        out: dict[str, Any] = invoke_in_process(function, event)
    with _METER._lock:
        _METER._usage(_METER.current()).units["api"] += 1
    return out


def wait_status(ports: Any, run_id: str, meter: AwsMeter | None = None, timeout: float = 600) -> str:
    """Wait for a terminal status and for the run's Step Functions execution to end. The polling is the ``poll``
    origin of the meter (counted apart, never in an operation's figure); the execution's end is read through a
    client the meter does not watch."""
    deadline = time.monotonic() + timeout
    ctx = meter.origin(POLL) if meter is not None else _null()
    with ctx:
        while time.monotonic() < deadline:
            rec = ports.runs.get_run(run_id)
            if rec is not None and rec.terminal:
                if meter is not None and meter.aws is not None and rec.execution_arn:
                    wait_execution(meter.aws, str(rec.execution_arn), deadline)
                    wait_streams(deadline)
                return str(rec.status)
            time.sleep(0.05)
    raise TimeoutError(run_id)


def wait_execution(aws: Any, arn: str, deadline: float) -> None:
    sfn = aws.client("stepfunctions")
    while time.monotonic() < deadline:
        if sfn.describe_execution(executionArn=arn)["status"] != "RUNNING":
            return
        time.sleep(0.05)
    raise TimeoutError(arn)


def wait_streams(deadline: float) -> None:
    """Until the stream consumers have handled every record written so far (the fan-out of a run's events is the
    run's work, counted with it)."""
    from shared.local.ddb_streams import wait_for_stream_idle

    if not wait_for_stream_idle(max(0.1, deadline - time.monotonic())):
        raise TimeoutError("stream consumers")


@contextmanager
def _null() -> Iterator[None]:
    yield


def cold_import_ms(module: str, repeat: int = 3) -> tuple[float, float]:
    """Best of ``repeat`` fresh interpreters: (wall ms, CPU ms) of importing a handler module (with .pyc). The
    CPU figure is the steadier one on a shared machine."""
    code = (
        "import time; t=time.perf_counter(); c=time.process_time(); import "
        + module
        + "; print((time.perf_counter()-t)*1000, (time.process_time()-c)*1000)"
    )
    best_wall = best_cpu = float("inf")
    for _ in range(repeat):
        # the functions' environment (infra/constructs/functions.py): no pydantic plugin scan
        env = {**os.environ, "PYDANTIC_DISABLE_PLUGINS": "__all__"}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
        wall, cpu = (float(x) for x in out.stdout.split())
        best_wall, best_cpu = min(best_wall, wall), min(best_cpu, cpu)
    return best_wall, best_cpu


def line(name: str, value: Any, unit: str = "") -> None:
    print(f"  {name:<58} {value}{(' ' + unit) if unit else ''}")
