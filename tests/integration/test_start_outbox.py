"""The start outbox (decision 0150): a create killed after any of its writes leaves no run ``pending`` forever.

The kill is injected at the AWS SDK boundary (botocore ``after-call`` hooks on the host's DynamoDB, S3 and Step
Functions clients): the k-th write of the create that AWS applied is followed by ``Killed``, a ``BaseException`` that
no ``except Exception`` of ours catches, as if the process died right there (no cleanup runs). Every k is tried
until a create gets through. Then the sweep runs, as the scheduled function does on AWS and the resume does at a
local restart: every run written is started and completes, or fails ``persistence_failed`` (a run.failed event,
the run's only terminal one), and no marker is left.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from openwop_client.types import CreateRunRequest

from tests.faults import check_run
from tests.helpers import eventually, unique
from tests.workflows import register_scripted_agent

WRITES = {
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "TransactWriteItems",
    "BatchWriteItem",
    "PutObject",
    "CopyObject",
    "DeleteObject",
    "DeleteObjects",
    "StartExecution",
}
EVAL_AGENT = "conformance-eval-agent"
EVAL_SUITE = "conformance-eval-regression-base"


class Killed(BaseException):
    """The create's process 'died' right after a write AWS applied."""


@dataclass
class Kill:
    after: int
    writes: list[str] = field(default_factory=list)  # the operations applied, in order, up to the kill
    run_ids: set[str] = field(default_factory=set)  # runs whose items the create wrote
    markers: set[str] = field(default_factory=set)  # runs whose start-outbox marker the create wrote


def _ports() -> Any:
    from shared.wiring import get_ports

    return get_ports()


def _clients(ports: Any) -> list[Any]:
    return [ports.runs._c, ports.blobs._c, ports.orchestrator._c]


def _note(kill: Kill, op: str, params: dict[str, Any]) -> None:
    puts = [(entry.get("Put") or {}).get("Item") or {} for entry in params.get("TransactItems") or []]
    for item in puts:
        if item.get("sk") == {"S": "RUN"}:
            kill.run_ids.add(item["pk"]["S"])
    for item in [*puts, params.get("Item") or {}] if op in ("PutItem", "TransactWriteItems") else []:
        if str((item.get("pk") or {}).get("S", "")).startswith("STARTS#"):
            kill.markers.add(item["sk"]["S"])


@contextmanager
def killed_after_write(ports: Any, n: int) -> Iterator[Kill]:
    """On this thread only (the local host's executions run on others): the n-th applied write raises ``Killed``."""
    kill, me = Kill(after=n), threading.get_ident()

    def before(params: Any = None, model: Any = None, context: Any = None, **_: Any) -> None:
        if threading.get_ident() == me and model.name in WRITES:
            context["openwop_write"] = (model.name, params)

    def after(http_response: Any = None, context: Any = None, **_: Any) -> None:
        seen = (context or {}).pop("openwop_write", None)
        if seen is None or http_response is None or http_response.status_code >= 300:
            return
        kill.writes.append(seen[0])
        _note(kill, *seen)
        if len(kill.writes) == kill.after:
            raise Killed(f"killed after write {n} ({seen[0]})")

    for client in _clients(ports):
        client.meta.events.register("before-parameter-build", before)
        client.meta.events.register("after-call", after)
    try:
        yield kill
    finally:
        for client in _clients(ports):
            client.meta.events.unregister("before-parameter-build", before)
            client.meta.events.unregister("after-call", after)


def _kill_at_every_write(create: Callable[[], Any]) -> tuple[list[Kill], str]:
    """Kill ``create`` after its 1st, 2nd, ... write until one gets through: the kills, and that create's run."""
    ports = _ports()
    kills: list[Kill] = []
    for n in range(1, 40):
        with killed_after_write(ports, n) as kill:
            try:
                created = create()
            except Killed:
                kills.append(kill)
                continue
        return kills, str(created.body["runId"])
    raise AssertionError("a create that never gets through")


def _settled(run_id: str) -> Any:
    rec = _ports().runs.get_run(run_id)
    return rec if rec is not None and rec.terminal else None


def _sweep_and_check(kills: list[Kill]) -> dict[int, tuple[str, str]]:
    """Sweep (no grace: the killed creates' process is gone), then every run written ends; by kill: (status, code)."""
    from shared.services.start_sweep import sweep

    ports = _ports()
    swept = sweep(ports, grace_s=0)
    assert swept.errors == {}
    outcome: dict[int, tuple[str, str]] = {}
    for kill in kills:
        # the marker is written with the run's items, in the create's first write (decision 0186)
        assert len(kill.markers) == 1 and kill.run_ids == kill.markers, kill
        (run_id,) = kill.markers
        assert kill.writes[0] == "TransactWriteItems"
        if not kill.run_ids:  # killed before the run item: nothing to start, nothing left
            assert ports.runs.get_run(run_id) is None and run_id in swept.cleared
            outcome[kill.after] = ("absent", "")
            continue
        rec = eventually(lambda r=run_id: _settled(r), timeout=60)
        events = ports.events.read_events(run_id)
        assert check_run(events) == [], (kill, [e["type"] for e in events])
        code = (rec.error or {}).get("code", "")
        assert rec.status in ("completed", "failed"), (kill, rec.status)
        if rec.status == "failed":
            assert code == "persistence_failed" and events[-1]["payload"]["error"]["code"] == code, (kill, rec.error)
        outcome[kill.after] = (rec.status, code)
    # And no marker is left of any of them
    left = {p.run_id for p in ports.starts.read_due(ports.clock.now_ms() + 1)}
    assert not left & {r for k in kills for r in k.markers}
    # and none holds a slot of its tenant once ended, whichever write its create was cut after (decision 0160)
    from shared.protocol.ids import tenant_of

    written = {r for k in kills for r in k.run_ids}
    for tenant in {tenant_of(r) for r in written}:
        eventually(lambda t=tenant: not written & set(ports.slots.holders(t)), timeout=30)
    return outcome


def test_a_workflow_run_create_killed_after_any_write_is_started_by_the_sweep(host):
    # Given a workflow run's create, killed after its 1st, 2nd, ... write until one gets through
    from shared.services import runs
    from shared.services.common import Caller

    wid = register_scripted_agent(host.tenant_a, "outbox")
    caller = Caller(tenant=host.tenant_a, subject_id="outbox-test")
    req = CreateRunRequest(workflowId=wid, inputs={"script": {"calls": [], "answer": unique("done")}})
    kills, through = _kill_at_every_write(lambda: runs.create(_ports(), caller, req))
    # (the run's items with its marker (decision 0186), the ARN its execution will have (decision 0175) and its
    # tenant's slot (decisions 0160, 0182); the start; its first append clears the marker, in another thread)
    assert [k.writes[-1] for k in kills] == ["TransactWriteItems", "StartExecution"]
    # When the sweep runs
    outcome = _sweep_and_check(kills)
    # Then every run written was started and completed
    assert outcome == {1: ("completed", ""), 2: ("completed", "")}
    assert eventually(lambda: _settled(through)).status == "completed"
    # and the run that got through left no marker: its first append deleted it
    eventually(lambda: through not in {p.run_id for p in _ports().starts.read_due(_ports().clock.now_ms() + 1)})


def test_an_eval_run_create_killed_after_any_write_is_started_or_failed_by_the_sweep(host):
    # Given an eval run's create, killed after each of its writes until one gets through
    from shared.services import runs
    from shared.services.common import Caller

    caller = Caller(tenant=host.tenant_a, subject_id="outbox-test")
    req = CreateRunRequest(mode="eval", evalSuiteRef=EVAL_SUITE, agentId=EVAL_AGENT)
    kills, through = _kill_at_every_write(lambda: runs.create(_ports(), caller, req))
    writes = [k.writes[-1] for k in kills]
    # (the run's items with its marker (decision 0186), the ARN its execution will have (decision 0175) and its
    # tenant's slot (decisions 0160, 0182), what the plan needs and the plan, the marker made ready, the start, the
    # marker's clear: no Advance task appends an eval run)
    assert writes[:1] == ["TransactWriteItems"] and writes[-3:] == [
        "PutItem",
        "StartExecution",
        "DeleteItem",
    ], writes
    ready = len(kills) - 2  # the kill right after the marker was made ready
    # When the sweep runs
    outcome = _sweep_and_check(kills)
    # Then a run whose create was cut before its plan and marker were whole failed persistence_failed (never
    # resumed forever, never RunGoneError), and one cut after that was started and completed
    for n in range(1, ready):
        assert outcome[n] == ("failed", "persistence_failed"), (n, writes)
    for n in range(ready, len(kills) + 1):
        assert outcome[n] == ("completed", ""), (n, writes)
    assert eventually(lambda: _settled(through), timeout=60).status == "completed"


def test_a_marker_younger_than_the_grace_period_is_left_alone(host):
    # Given an eval run's create killed right after its run items (its plan never written)
    from shared.services import runs
    from shared.services.common import Caller
    from shared.services.start_sweep import sweep

    caller = Caller(tenant=host.tenant_a, subject_id="outbox-test")
    req = CreateRunRequest(mode="eval", evalSuiteRef=EVAL_SUITE, agentId=EVAL_AGENT)
    ports = _ports()
    with killed_after_write(ports, 1) as kill:
        try:
            runs.create(ports, caller, req)
        except Killed:
            pass
    (run_id,) = kill.run_ids
    # When a sweep runs with the default grace (60 s): the create might still be writing
    swept = sweep(ports)
    # Then the run is untouched and its marker kept; a sweep once the grace has passed fails it
    assert run_id not in swept.settled and ports.runs.get_run(run_id).status == "pending"
    assert run_id in {p.run_id for p in ports.starts.read_due(ports.clock.now_ms() + 1)}
    assert run_id in sweep(ports, grace_s=0).failed
    assert ports.runs.get_run(run_id).error["code"] == "persistence_failed"


def test_the_scheduled_function_fails_a_stranded_eval_once_its_grace_has_passed(host):
    # Given an eval run's create killed right after its run items (its plan never written)
    import dataclasses

    from functions.sweep_starts.handler import lambda_handler
    from shared import wiring
    from shared.services import runs
    from shared.services.common import Caller

    ports = _ports()
    req = CreateRunRequest(mode="eval", evalSuiteRef=EVAL_SUITE, agentId=EVAL_AGENT)
    with killed_after_write(ports, 1) as kill:
        try:
            runs.create(ports, Caller(tenant=host.tenant_a, subject_id="outbox-test"), req)
        except Killed:
            pass
    (run_id,) = kill.run_ids
    # When the scheduled function is invoked with EventBridge's event, on a deployment whose grace has passed
    event = {"id": unique("tick"), "detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}
    before = wiring._override
    wiring.set_ports(dataclasses.replace(ports, settings=dataclasses.replace(ports.settings, start_sweep_grace_s=0)))
    try:
        out = lambda_handler(event, None)
    finally:
        wiring.set_ports(before)
    # Then it failed the run persistence_failed and says so
    assert run_id in out["failed"] and out["errors"] == {}
    assert ports.runs.get_run(run_id).error["code"] == "persistence_failed"


# A kill -9 at a chosen write of the first create, in a served host: botocore's client call wrapped from
# ``sitecustomize`` (the served process imports it at start, from PYTHONPATH). The thread that writes a start marker
# (in the transaction that writes the run's items) is the create's; after its n-th applied write the process exits at once (``os._exit``: no cleanup, no flush beyond
# the journal's own writes), noting the run id first.
KILL_HOOK = """
import os, threading
from botocore.client import BaseClient

_after, _note = int(os.environ["OUTBOX_KILL_AFTER"]), os.environ["OUTBOX_KILL_NOTE"]
_writes = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem", "PutObject", "StartExecution"}
_armed = {}
_call = BaseClient._make_api_call


def _make_api_call(self, operation, params):
    out = _call(self, operation, params)
    me = threading.get_ident()
    items = [(e.get("Put") or {}).get("Item") or {} for e in params.get("TransactItems") or []]
    marker = [i for i in items if str((i.get("pk") or {}).get("S", "")).startswith("STARTS#")]
    if marker and not _armed:
        _armed[me] = 0
        with open(_note, "w") as f:
            f.write(marker[0]["sk"]["S"])
    if me in _armed and operation in _writes:
        _armed[me] += 1
        if _armed[me] == _after:
            os._exit(137)
    return out


BaseClient._make_api_call = _make_api_call
"""


@pytest.mark.timeout(900)
@pytest.mark.parametrize(("after", "expected"), [(1, "failed"), (3, "completed")], ids=["before-plan", "after-ready"])
def test_a_host_killed_mid_eval_create_settles_the_run_when_it_starts_again(tmp_path, after, expected):
    import os

    from tests.helpers import ServeProcess
    from tests.wire import raw

    key, data, note = "dev-key-tenant-a", tmp_path / "data", tmp_path / "note"
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(KILL_HOOK)
    # Given a kept host killed right after the n-th write of an eval run's create: its run items (1: the plan never
    # written, the stranded eval) or its marker made ready (3: the plan stored, no execution started)
    killed = ServeProcess(
        tmp_path,
        *("--port", "0", "--data-dir", str(data)),
        name="killed",
        env={
            "PYTHONPATH": f"{tmp_path / 'hook'}{os.pathsep}{Path(__file__).resolve().parents[2]}",
            "OUTBOX_KILL_AFTER": str(after),
            "OUTBOX_KILL_NOTE": str(note),
        },
    ).start(timeout=300)
    assert killed.serving, killed.stderr[-3000:]
    body = {"mode": "eval", "evalSuiteRef": EVAL_SUITE, "agentId": EVAL_AGENT}
    with pytest.raises(OSError):  # the connection drops: no answer
        raw(killed.base_url, "POST", "/runs", body, key=key)
    assert killed.wait(timeout=60) == 137
    run_id = note.read_text()
    # When the host starts again on the same folder
    again = ServeProcess(tmp_path, "--port", "0", "--data-dir", str(data), name="again").start(timeout=300)
    try:
        assert again.serving, again.stderr[-3000:]
        # Then the run is settled: failed persistence_failed (cut before its plan), or started and completed
        wire = run_id.replace("/", "~2F")

        def snapshot() -> Any:
            r = raw(again.base_url, "GET", f"/runs/{wire}", key=key)
            assert r.status == 200, r.text
            return r.json if r.json["status"] in ("completed", "failed", "cancelled") else None

        snap = eventually(snapshot, timeout=120, interval=0.2)
        assert snap["status"] == expected, snap
        if expected == "failed":
            assert snap["error"]["code"] == "persistence_failed"
            assert "1 runs whose create was cut failed" in again.out, again.out
    finally:
        again.stop()


@contextmanager
def _recorded(ports: Any) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Every DynamoDB write the host sends meanwhile, from any thread: (operation, parameters)."""
    seen: list[tuple[str, dict[str, Any]]] = []

    def before(params: Any = None, model: Any = None, **_: Any) -> None:
        if model.name in WRITES:
            seen.append((model.name, params))

    client = ports.runs._c
    client.meta.events.register("before-parameter-build", before)
    try:
        yield seen
    finally:
        client.meta.events.unregister("before-parameter-build", before)


def _marker_writes(seen: list[tuple[str, dict[str, Any]]], run_id: str) -> list[tuple[str, str, list[str]]]:
    """The writes that name ``run_id``'s marker: (operation, its action on the marker, the sort keys or sequences of
    the other items of the same request)."""
    out = []
    for op, params in seen:
        actions = [next(iter(e.items())) for e in params.get("TransactItems") or []] or [(op, params)]
        for name, act in actions:
            key = act.get("Key") or act.get("Item") or {}
            if str(key.get("pk", {}).get("S", "")).startswith("STARTS#") and key["sk"]["S"] == run_id:
                others = [
                    str((o.get("Key") or o.get("Item") or {}).get("sk", {}).get("S", ""))
                    or "seq " + str((o.get("Key") or o.get("Item") or {}).get("seq", {}).get("N", ""))
                    for n, o in actions
                    if o is not act
                ]
                out.append((op, name, others))
    return out


def test_a_run_s_marker_rides_its_create_and_its_first_append(host):
    # Given a workflow run created and run to its end, and a branch of it from its 2nd event, every DynamoDB write
    # the host sends recorded
    from openwop_client.types import ForkRunRequest

    from shared.services import forks, runs
    from shared.services.common import Caller

    ports = _ports()
    wid = register_scripted_agent(host.tenant_a, "outbox")
    caller = Caller(tenant=host.tenant_a, subject_id="outbox-test")
    req = CreateRunRequest(workflowId=wid, inputs={"script": {"calls": [], "answer": unique("done")}})
    with _recorded(ports) as seen:
        run_id = str(runs.create(ports, caller, req).body["runId"])
        assert eventually(lambda: _settled(run_id)).status == "completed"
        wire = run_id.replace("/", "~2F")
        fork_id = str(forks.fork_run(ports, caller, wire, ForkRunRequest(fromSeq=2, mode="branch")).body["runId"])
        assert eventually(lambda: _settled(fork_id)).status == "completed"
    # Then each one's marker was written by the transaction that wrote its run item and deleted by the transaction
    # that appended its first own event (the run's 0th, the branch's 2nd), never by a request of its own (decision 0186)
    for rid, first in ((run_id, "seq 0"), (fork_id, "seq 2")):
        writes = _marker_writes(seen, rid)
        assert [(op, name) for op, name, _ in writes] == [
            ("TransactWriteItems", "Put"),
            ("TransactWriteItems", "Delete"),
        ]
        assert "RUN" in writes[0][2] and first in writes[1][2], writes
    # and none is left
    assert not {run_id, fork_id} & {p.run_id for p in ports.starts.read_due(ports.clock.now_ms() + 1)}
