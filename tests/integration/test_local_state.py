"""The local host keeps its state: ``openwop-serverless serve --data-dir D`` in a subprocess, stopped with SIGKILL
and started again on the same folder.

Everything the host stored reads back (tools, agents, suites, webhooks, runs and their events byte for byte), runs
that were in flight finish after the restart, a replay fork of a recorded run still calls no tool, nothing a 2xx
acknowledged is lost whatever the moment of the kill, and a folder that cannot be read (another version, another
host on it, not a data folder) is refused in one line with exit 2, never emptied. The tool server and the webhook
receiver live in this test process, so their counts span the host's restarts. Loopback only.
"""

from __future__ import annotations

import http.client
import json
import random
import re
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ServeProcess, eventually
from tests.wire import raw
from tests.workflows import definition, edge, node, static, variable

BASE = "/host/openwop-serverless"
KEY = "dev-key-tenant-a"
TERMINAL = ("completed", "failed", "cancelled")


def _wire(run_id: str) -> str:
    return run_id.replace("/", "~2F")


def _events_body(base_url: str, run_id: str) -> str:
    """The run's whole log as the poll endpoint answers it (one page: these runs are short)."""
    r = raw(base_url, "GET", f"/runs/{_wire(run_id)}/events/poll?timeout=1", key=KEY)
    assert r.status == 200, r.text
    return r.text


def _status(base_url: str, run_id: str) -> str:
    r = raw(base_url, "GET", f"/runs/{_wire(run_id)}", key=KEY)
    assert r.status == 200, (run_id, r.status, r.text)
    return str(r.json["status"])


def _finished(base_url: str, run_id: str, timeout: float = 120) -> str:
    return str(eventually(lambda: (s := _status(base_url, run_id)) in TERMINAL and s, timeout=timeout, interval=0.2))


def _create(base_url: str, workflow_id: str, inputs: dict[str, Any] | None = None) -> str:
    r = raw(base_url, "POST", "/runs", {"workflowId": workflow_id, **({"inputs": inputs} if inputs else {})}, key=KEY)
    assert r.status == 201, r.text
    return str(r.json["runId"])


def _serve(tmp_path: Path, data_dir: Path, name: str, **env: str) -> ServeProcess:
    serve = ServeProcess(tmp_path, "--port", "0", "--data-dir", str(data_dir), name=name, env=env).start()
    assert serve.serving, serve.stderr[-3000:]
    return serve


@contextmanager
def _killed_after(tmp_path: Path, data_dir: Path, name: str, **env: str) -> Iterator[ServeProcess]:
    """A kept host for the block, killed with SIGKILL when the block ends (no shutdown code runs)."""
    host = _serve(tmp_path, data_dir, name, **env)
    try:
        yield host
    finally:
        if host.proc.poll() is None:
            host.kill()


@pytest.fixture
def receiver():
    from shared.cli.webhook_receiver import WebhookReceiver

    rx = WebhookReceiver()
    rx.start()
    yield rx
    rx.stop()


@pytest.mark.timeout(900)
def test_everything_registered_and_recorded_reads_back_after_a_sigkill(tmp_path, server, receiver):
    from shared.cli.webhook_receiver import verify_v1

    tools, tools_url = server  # this process's loopback tool server (conftest): its hits span the restarts
    data = tmp_path / "state"
    org = "t" + uuid.uuid4().hex[:8]
    tool_id, agent_id, suite_id = f"{org}.crm:lookup", f"{org}.support", f"{org}.evals.support"
    host = _serve(tmp_path, data, "first")
    b = host.base_url
    try:
        # Given a tool, a workflow calling it then holding 6 s, an agent, a suite and a webhook
        tool = {
            "toolId": tool_id,
            "description": "Look a customer up",
            "replayPolicy": "idempotent",
            "source": {"kind": "http", "url": tools_url + "/crm/lookup"},
            "inputSchema": {"type": "object", "required": ["customerId"]},
        }
        assert raw(b, "POST", f"{BASE}/tools", tool, key=KEY).status == 201
        wid, slow = f"{org}-lookup", f"{org}-slow"
        lookup = node("t", "core.tool", config={"tool": tool_id}, inputs={"customerId": variable("customer")})
        customer = [{"name": "customer", "type": "string", "required": True}]
        for workflow in (
            definition(wid, [lookup], variables=customer),
            definition(
                slow,
                [lookup, node("h", "core.conformance.hold", inputs={"delayMs": static(6000)}), node("n", "core.noop")],
                [edge("t", "h"), edge("h", "n")],
                variables=customer,
            ),
        ):
            r = raw(b, "POST", f"{BASE}/workflows", workflow, key=KEY)
            assert r.status == 201, r.text
        agent = {
            "version": "1.0.0",
            "maxTurns": 4,
            "manifest": {
                "agentId": agent_id,
                "persona": "Support",
                "modelClass": "general",
                "systemPrompt": "Resolve the ticket.",
                "toolAllowlist": [tool_id],
            },
            "model": {"provider": "mock", "model": "demo-model", "mockProvider": {"script": [{"text": "ok"}]}},
        }
        r = raw(b, "POST", f"{BASE}/agents", agent, key=KEY)
        assert r.status == 201, r.text
        suite = {
            "suiteId": suite_id,
            "version": "1.0.0",
            "modes": ["golden"],
            "targetAgentId": agent_id,
            "tasks": [
                {
                    "taskId": "one",
                    "input": "c-1",
                    "expected": {"kind": "golden", "match": {"strategy": "exact", "value": "ok"}},
                }
            ],
        }
        assert raw(b, "POST", f"{BASE}/eval-suites", suite, key=KEY).status == 201
        hook = raw(b, "POST", "/webhooks", {"url": receiver.url + "/kept", "events": ["run.completed"]}, key=KEY)
        assert hook.status == 201, hook.text
        webhook_id, secret = hook.json["subscriptionId"], hook.json["secret"]
        tool_doc = raw(b, "GET", f"/tools/{tool_id}", key=KEY).text
        agent_doc = raw(b, "GET", f"/agents/{agent_id}", key=KEY).text
        suite_read = raw(b, "GET", f"{BASE}/eval-suites/{suite_id}", key=KEY)
        hooks_read = raw(b, "GET", "/webhooks", key=KEY)
        assert suite_read.status == 200 and hooks_read.status == 200, (suite_read.text, hooks_read.text)
        assert suite_id in suite_read.text and webhook_id in hooks_read.text and secret not in hooks_read.text
        # and a recorded run (one real tool call), its log read, its webhook delivered; and a run still holding
        recorded = _create(b, wid, {"customer": "c-1"})
        assert _finished(b, recorded) == "completed"
        log_before = _events_body(b, recorded)
        eventually(lambda: receiver.deliveries(webhook_id, recorded), timeout=60, interval=0.2)
        holding = _create(b, slow, {"customer": "c-2"})
        eventually(
            lambda: (
                '"node.started"' in _events_body(b, holding)
                and json.loads(_events_body(b, holding))["events"][-1]["nodeId"] == "h"
            ),
            timeout=60,
            interval=0.2,
        )
        gated = _create(b, "conformance-approval")  # and a run parked on an approval
        evaluated = raw(
            b, "POST", "/runs", {"mode": "eval", "evalSuiteRef": f"{suite_id}@1.0.0", "agentId": agent_id}, key=KEY
        )  # and an eval run, likely in flight
        assert evaluated.status == 201, evaluated.text
        eventually(lambda: _status(b, gated) == "waiting-approval", timeout=60, interval=0.2)
        hits = tools.count("/crm/lookup")
        assert hits == 2
        # When the host is killed (no shutdown code runs) and started again on the same folder
        host.kill()
    finally:
        if host.proc.poll() is None:
            host.kill()
    again = _serve(tmp_path, data, "second")
    b = again.base_url
    try:
        assert f"local state: {data.resolve()}" in again.out
        resumed = re.search(r"; (\d+) unfinished runs? resumed", again.out)
        assert resumed and int(resumed.group(1)) >= 2, again.out  # the held run and the parked one (and the eval?)
        # Then every registration reads back as it was
        assert raw(b, "GET", f"/tools/{tool_id}", key=KEY).text == tool_doc
        assert raw(b, "GET", f"/agents/{agent_id}", key=KEY).text == agent_doc
        assert raw(b, "GET", f"{BASE}/eval-suites/{suite_id}", key=KEY).text == suite_read.text
        assert raw(b, "GET", "/webhooks", key=KEY).text == hooks_read.text
        same_suite = raw(b, "POST", f"{BASE}/eval-suites", suite, key=KEY)
        assert same_suite.status == 200, same_suite.text  # the identical suite is already there
        # the recorded run and its log, byte for byte
        assert _status(b, recorded) == "completed"
        assert _events_body(b, recorded) == log_before
        # the held run finished where its log ended, without calling its tool again
        assert _finished(b, holding) == "completed"
        held = [e["type"] for e in json.loads(_events_body(b, holding))["events"]]
        assert held.count("node.completed") == 3 and held[-1] == "run.completed"
        # the parked run waits again, and its approval completes it
        assert _status(b, gated) == "waiting-approval"
        accepted = raw(
            b, "POST", f"/runs/{_wire(gated)}/interrupts/gate", {"resumeValue": {"action": "accept"}}, key=KEY
        )
        assert accepted.status == 200, accepted.text
        assert _finished(b, gated) == "completed"
        # the eval run finished (resumed from Prepare if it was in flight: stored trials are not run again)
        eval_id = evaluated.json["runId"]
        assert _finished(b, eval_id) == "completed"
        summary = raw(b, "GET", f"/runs/{_wire(eval_id)}/eval-summary", key=KEY)
        assert summary.status == 200, summary.text
        assert [(t["taskId"], t["passed"]) for t in summary.json["tasks"]] == [("one", True)]
        # a replay fork of the recorded run serves every answer: zero tool hits
        fork = raw(b, "POST", f"/runs/{_wire(recorded)}:fork", {"fromSeq": 0, "mode": "replay"}, key=KEY)
        assert fork.status == 201, fork.text
        assert _finished(b, fork.json["runId"]) == "completed"
        assert tools.count("/crm/lookup") == hits
        # and the webhook (with its secret) still delivers: a new run's completion arrives, verified
        fresh = _create(b, wid, {"customer": "c-2"})
        assert _finished(b, fresh) == "completed" and tools.count("/crm/lookup") == hits + 1
        (delivered,) = eventually(lambda: receiver.deliveries(webhook_id, fresh), timeout=60, interval=0.2)
        assert verify_v1(secret, delivered)
    finally:
        assert again.stop() == 0, again.stderr[-3000:]


def _events_array(body: str) -> str:
    """The ``events`` array of a poll answer exactly as its bytes came (the JSON text between its brackets)."""
    start = body.index('"events":') + len('"events":')
    while body[start] in " \t\r\n":
        start += 1
    _, end = json.JSONDecoder().raw_decode(body, start)
    return body[start:end]


def _is_prefix(seen: str, after: str) -> bool:
    """The events of ``seen`` (a poll answer) are, byte for byte, the first events of ``after``."""
    first, last = _events_array(seen), _events_array(after)
    if first == "[]":
        return True
    head = first[:-1]  # without the closing bracket: the next event, or the end, follows in ``after``
    return last.startswith(head) and last[len(head)] in ",]"


def _read_in_flight(read: dict[str, str], seen: dict[str, str]) -> bool:
    """Some run not yet finished has had events read by a client."""
    return any(_events_array(body) != "[]" for run_id, body in list(seen.items()) if run_id not in read)


def _creates_until_killed(
    host: ServeProcess, rng: random.Random, acked: dict[str, str | None], read: dict[str, str], seen: dict[str, str]
) -> None:
    """Create runs (one real tool call each, none, or a 4 s hold) until the host dies; keep every acknowledged id,
    the log of each finished run as it was read, and the latest events read of each run still in flight."""
    b = host.base_url
    inputs: dict[str, dict[str, Any]] = {
        "demo-support": {"customerId": "c-1", "city": "Oslo"},
        "conformance-noop": {},
        "conformance-delay": {"delayMs": 4000},
    }  # in flight for a while
    while host.proc.poll() is None:
        flow = rng.choice(sorted(inputs))
        try:
            r = raw(
                b, "POST", "/runs", {"workflowId": flow, **({"inputs": inputs[flow]} if inputs[flow] else {})}, key=KEY
            )
        except (OSError, http.client.HTTPException):
            return  # the host is gone: this create got no whole answer
        if r.status != 201:
            continue
        acked[r.json["runId"]] = None
        for run_id in [k for k, v in acked.items() if v is None][-3:]:
            try:
                body = _events_body(b, run_id)
            except (OSError, http.client.HTTPException, AssertionError):
                return
            if json.loads(body)["isTerminal"]:
                acked[run_id] = "read"
                read[run_id] = body
            else:
                seen[run_id] = body


@pytest.mark.timeout(1200)
def test_nothing_acknowledged_is_lost_when_the_host_is_killed_at_any_moment(tmp_path):
    seed = int(time.time())
    rng = random.Random(seed)
    data = tmp_path / "state"
    acked: dict[str, str | None] = {}
    read: dict[str, str] = {}
    seen: dict[str, str] = {}  # a run still in flight: the events a client had read of it
    # snapshots every ~64 KiB of journal: kills land before, during and after snapshots too
    env = {"OPENWOP_SNAPSHOT_JOURNAL_MB": "0.0625"}
    for round_ in range(3):
        host = _serve(tmp_path, data, f"round{round_}", **env)
        try:
            workers = [
                threading.Thread(
                    target=_creates_until_killed,
                    args=(host, random.Random(rng.random()), acked, read, seen),
                    daemon=True,
                )
                for _ in range(2)
            ]
            for worker in workers:
                worker.start()
            time.sleep(rng.uniform(2.0, 8.0))
            # the kill lands at a random moment, but never before a client has read events of a run in flight
            # (a loaded machine can start runs slower than the random delay): a condition, bounded, not a sleep
            deadline = time.monotonic() + 60
            while not _read_in_flight(read, seen) and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            host.kill()
        for worker in workers:
            worker.join(60)
    final = _serve(tmp_path, data, "final", **env)
    try:
        b = final.base_url
        assert len(acked) >= 3, f"seed {seed}: only {len(acked)} runs acknowledged"
        assert read, f"seed {seed}: no run finished before a kill"
        snapshots = list(data.glob("snapshot.pickle"))
        assert snapshots, f"seed {seed}: no snapshot was ever written"
        print(
            f"seed {seed}: {len(acked)} runs acknowledged over 3 kills, {len(read)} logs read before a kill, "
            f"{len(seen) - len(set(seen) & set(read))} runs read in flight;",
            final.out.splitlines()[2],
        )
        for run_id in acked:  # every acknowledged run exists, and finishes (resumed where its log ended)
            assert _finished(b, run_id, timeout=180) == "completed", (seed, run_id)
        for run_id, body in read.items():  # every log read before a kill is there byte for byte
            assert _events_body(b, run_id) == body, (seed, run_id)
        in_flight = {r: body for r, body in seen.items() if r not in read}
        assert _read_in_flight(read, seen), f"seed {seed}: no events of a run in flight were read"
        for run_id, body in in_flight.items():  # every event read of a run in flight starts its log, byte for byte
            assert _is_prefix(body, _events_body(b, run_id)), (seed, run_id, body)
    finally:
        assert final.stop() == 0, final.stderr[-3000:]


def _endpoint_client(host: ServeProcess, service: str) -> Any:
    """A boto3 client for the host's moto endpoint, with the credential in the file its start printed."""
    import boto3

    endpoint = re.search(r"moto endpoint .*: (http://127\.0\.0\.1:\d+)", host.out).group(1)  # type: ignore
    path = re.search(r"`\. (\S+)` \(mode 0600\)", host.out).group(1)  # type: ignore
    exported = dict(p.split("=", 1) for line in open(path).read().splitlines()[1:] for p in line.split()[1:])
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=exported["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=exported["AWS_SECRET_ACCESS_KEY"],
    )


@pytest.mark.timeout(900)
def test_snapshots_replace_the_journal_while_the_host_serves(tmp_path):
    data = tmp_path / "state"
    with _killed_after(tmp_path, data, "snapshots", OPENWOP_SNAPSHOT_JOURNAL_MB="1") as host:
        ddb = _endpoint_client(host, "dynamodb")
        # Given ~4 MB of writes (8,000 items of 400 B, in batches of 25) through moto's endpoint
        pad = "x" * 400
        for batch in range(320):
            ddb.batch_write_item(
                RequestItems={
                    "openwop-host": [
                        {
                            "PutRequest": {
                                "Item": {"pk": {"S": f"BULK#{batch}"}, "sk": {"S": f"{i:02d}"}, "v": {"S": pad}}
                            }
                        }
                        for i in range(25)
                    ]
                }
            )
        # Then snapshots were written while it served (each taking longer than the request that asked for it),
        # and the journal they cover is gone
        eventually(lambda: (data / "snapshot.pickle").exists(), timeout=120, interval=0.2)
        eventually(
            lambda: sum(p.stat().st_size for p in data.glob("journal-*.log")) < 2_500_000, timeout=120, interval=0.2
        )
        assert "snapshot failed" not in host.stderr and "snapshot child" not in host.stderr
    # And a start after a kill has every item (the snapshot plus the journal after it)
    again = _serve(tmp_path, data, "after-snapshots")
    try:
        ddb = _endpoint_client(again, "dynamodb")
        count = sum(
            page["Count"]
            for page in ddb.get_paginator("scan").paginate(
                TableName="openwop-host",
                FilterExpression="begins_with(pk, :b)",
                ExpressionAttributeValues={":b": {"S": "BULK#"}},
                Select="COUNT",
            )
        )
        assert count == 8000
    finally:
        assert again.stop() == 0, again.stderr[-3000:]


def _holding(folder: Path, needles: list[str]) -> list[tuple[str, str]]:
    """Every (file, needle) where a file of the data folder holds a needle's bytes."""
    return [
        (p.name, n) for p in sorted(folder.iterdir()) if p.is_file() for n in needles if n.encode() in p.read_bytes()
    ]


@pytest.mark.timeout(900)
def test_an_erased_run_leaves_nothing_of_it_in_the_data_folder(tmp_path, receiver):
    data = tmp_path / "state"
    city = "Erased" + uuid.uuid4().hex  # the weather tool answers with the city it was asked about
    with _killed_after(tmp_path, data, "erasure") as host:
        b = host.base_url
        # Given a webhook whose receiver is down: the run's deliveries wait in the queue, backing off
        hook = raw(
            b,
            "POST",
            "/webhooks",
            {"url": receiver.url + "/erased", "events": ["run.started", "node.completed", "run.completed"]},
            key=KEY,
        )
        assert hook.status == 201, hook.text
        webhook_id = hook.json["subscriptionId"]
        receiver.stop()
        # and a finished run whose tool answer holds the city, which the folder's journal holds too
        run_id = _create(b, "demo-support", {"customerId": "c-1", "city": city})
        assert _finished(b, run_id) == "completed"
        assert city in _events_body(b, run_id)
        needles = [city, run_id.partition("/")[2]]
        assert _holding(data, needles)
        # When it is erased
        assert raw(b, "DELETE", f"/runs/{_wire(run_id)}", key=KEY).status == 204
        # Then within the erasure's follow-up (its hook, then one snapshot) no file of the folder holds its tool
        # answer or its id: not the journal, not the snapshot (its items, its queued deliveries, its stream records)
        eventually(lambda: not _holding(data, needles), timeout=180, interval=0.5)
        assert raw(b, "GET", f"/runs/{_wire(run_id)}", key=KEY).status == 404
        # and the receiver, back, gets none of its deliveries while a later run's arrive
        receiver.start()
        later = _create(b, "conformance-noop")
        eventually(lambda: receiver.deliveries(webhook_id, later), timeout=60, interval=0.2)
        assert receiver.deliveries(webhook_id, run_id) == []
    # And a start after a kill brings none of it back
    again = _serve(tmp_path, data, "after-erasure")
    try:
        gone = raw(again.base_url, "GET", f"/runs/{_wire(run_id)}", key=KEY)
        assert gone.status == 404, again.stderr[-6000:]
        assert not _holding(data, needles)
    finally:
        assert again.stop() == 0, again.stderr[-3000:]
    assert receiver.deliveries(webhook_id, run_id) == []


# -- refusals ---------------------------------------------------------------------------------------------------------


def _folder_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != "lock"}


@pytest.mark.parametrize(
    "written_by",
    [
        {"format": 0, "host": "0.0.1", "moto": "5.2.5"},
        {"format": 1, "host": "0.0.9", "moto": "5.1.0"},
    ],
)
def test_a_folder_another_version_wrote_is_refused_naming_both_and_left_as_it_is(tmp_path, written_by):
    from shared.local.datadir import FORMAT, host_version, moto_version

    data = tmp_path / "old"
    data.mkdir()
    (data / "FORMAT").write_text(json.dumps(written_by))
    (data / "journal-00000001.log").write_bytes(b"\x00" * 64)
    before = _folder_bytes(data)
    serve = ServeProcess(tmp_path, "--port", "0", "--data-dir", str(data), name="old").start()
    assert serve.wait(60) == 2
    (line,) = serve.stderr.strip().splitlines()
    assert line.startswith("error: data folder ") and "Traceback" not in serve.stderr
    assert (
        f"format {written_by['format']} by openwop-serverless {written_by['host']} (moto {written_by['moto']})" in line
    )
    assert f"openwop-serverless {host_version()} (format {FORMAT}, moto {moto_version()})" in line
    assert _folder_bytes(data) == before


def test_a_second_host_on_the_same_folder_refuses_to_start(tmp_path):
    data = tmp_path / "shared"
    first = _serve(tmp_path, data, "first")
    try:
        second = ServeProcess(tmp_path, "--port", "0", "--data-dir", str(data), name="second").start()
        assert second.wait(60) == 2
        (line,) = second.stderr.strip().splitlines()
        assert line == (
            f"error: data folder {data.resolve()} is in use by another openwop-serverless host "
            f"(pid {first.proc.pid}); stop it, or start this one with another --data-dir or --ephemeral"
        )
        assert raw(first.base_url, "GET", "/.well-known/openwop").status == 200  # the first is unharmed
    finally:
        assert first.stop() == 0


def test_a_folder_that_is_not_a_data_folder_is_refused(tmp_path):
    data = tmp_path / "docs"
    data.mkdir()
    (data / "notes.txt").write_text("mine")
    serve = ServeProcess(tmp_path, "--port", "0", "--data-dir", str(data), name="docs").start()
    assert serve.wait(60) == 2
    assert "is not an openwop-serverless data folder" in serve.stderr and "Traceback" not in serve.stderr
    assert [p.name for p in data.iterdir() if p.name != "lock"] == ["notes.txt"]


def test_state_is_kept_in_dot_openwop_of_the_working_directory_unless_ephemeral(tmp_path):
    # By default: .openwop under the working directory, named at start
    work = tmp_path / "project"
    work.mkdir()
    serve = ServeProcess(tmp_path, "--port", "0", name="default", cwd=work).start()
    try:
        assert serve.serving, serve.stderr[-3000:]
        assert f"local state: {work.resolve() / '.openwop'} (kept across restarts" in serve.out
        assert json.loads((work / ".openwop" / "FORMAT").read_text())["format"] == 2
    finally:
        assert serve.stop() == 0
    # With --ephemeral: nothing is written anywhere
    empty = tmp_path / "scratch"
    empty.mkdir()
    serve = ServeProcess(tmp_path, "--port", "0", "--ephemeral", name="ephemeral", cwd=empty).start()
    try:
        assert serve.serving, serve.stderr[-3000:]
        assert "local state: in memory only (--ephemeral)" in serve.out
        assert _create(serve.base_url, "conformance-noop")
    finally:
        assert serve.stop() == 0
    assert list(empty.iterdir()) == []


# -- the journal's records (no host) -----------------------------------------------------------------------------------


def test_a_torn_last_record_is_dropped_and_damage_elsewhere_is_refused(tmp_path):
    import pickle

    from shared.local.datadir import DataDirError
    from shared.local.journal_records import frame, read_segment

    records = [("idle", f"fn-{i}", "table") for i in range(3)]
    whole = b"".join(frame(pickle.dumps(r)) for r in records)
    path = tmp_path / "journal-00000001.log"
    # a write the kill cut short: the records before it are read, the torn one is dropped
    torn = whole + frame(pickle.dumps(("idle", "cut", "t")))[:-3]
    path.write_bytes(torn)
    assert list(read_segment(path, last=True)) == records
    # and cut off the file: once later segments follow it, it still reads whole
    assert path.read_bytes() == whole
    assert list(read_segment(path, last=False)) == records
    # the same torn bytes in a segment that is not the last, or a flipped byte before the end: refused
    path.write_bytes(torn)
    with pytest.raises(DataDirError, match="is damaged at byte"):
        list(read_segment(path, last=False))
    damaged = bytearray(whole)
    damaged[len(frame(pickle.dumps(records[0]))) + 12] ^= 0xFF
    path.write_bytes(bytes(damaged))
    with pytest.raises(DataDirError, match="is damaged at byte"):
        list(read_segment(path, last=True))


def test_a_start_whose_journal_holds_an_erasure_not_yet_snapshotted_takes_the_snapshot(tmp_path):
    import pickle

    from shared.local.datadir import DataDir
    from shared.local.journal_records import frame
    from shared.local.persistence import Journal

    # Given a folder whose journal ends with an erasure's marker (the host died before that snapshot was written),
    # and one whose journal has none
    for name, records, compact in (
        ("erased", [("idle", "fn", "t"), ("erased",)], True),
        ("plain", [("idle", "fn", "t")], False),
    ):
        folder = DataDir.open(tmp_path / name)
        try:
            folder.segment(1).write_bytes(b"".join(frame(pickle.dumps(r)) for r in records))
            journal = Journal(folder, app=None)
            # When the journal is recovered
            report = journal.recover()
            journal.close()
        finally:
            folder.close()
        # Then only the first start is told to take a snapshot once it runs
        assert (report.records, report.compact) == (len(records), compact), name


@pytest.mark.parametrize(
    ("auth", "target", "method", "kept"),
    [
        ("dynamodb", "DynamoDB_20120810.PutItem", "POST", True),
        ("dynamodb", "DynamoDB_20120810.TransactWriteItems", "POST", True),
        ("dynamodb", "DynamoDB_20120810.Query", "POST", False),
        ("dynamodb", "DynamoDB_20120810.BatchGetItem", "POST", False),
        ("dynamodb", "DynamoDBStreams_20120810.GetRecords", "POST", False),
        ("s3", "", "PUT", True),
        ("s3", "", "DELETE", True),
        ("s3", "", "GET", False),
        ("secretsmanager", "secretsmanager.PutSecretValue", "POST", True),
        ("secretsmanager", "secretsmanager.GetSecretValue", "POST", False),
        ("sqs", "AmazonSQS.SendMessage", "POST", True),
        ("sqs", "AmazonSQS.ReceiveMessage", "POST", False),
        ("states", "AWSStepFunctions.StartExecution", "POST", False),
        ("lambda", "", "POST", False),
        ("", "", "POST", False),
    ],
)
def test_only_requests_that_change_kept_data_are_journaled(auth, target, method, kept):
    from shared.local.journal_records import classify

    environ = {"REQUEST_METHOD": method, "HTTP_X_AMZ_TARGET": target}
    if auth:
        environ["HTTP_AUTHORIZATION"] = (
            f"AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/{auth}/aws4_request, "
            "SignedHeaders=host, Signature=abc"
        )
    assert (classify(environ) is not None) is kept


def test_a_snapshot_names_its_rebuilders_where_format_1_wrote_them():
    """A pickle refers to a function by module and name: the two rebuilders a snapshot holds keep the module they
    had when format 1 was written (``shared.local.persistence``), so a folder reads with a host before the
    modules were split or after."""
    import io
    import pickle

    from moto.dynamodb.models.dynamo_type import LimitedSizeDict
    from moto.s3.utils import _VersionedKeyStore

    from shared.local.snapshots import dump_snapshot

    # Given an item's attributes and an S3 bucket's keys with two versions of one object
    attributes = LimitedSizeDict()
    attributes["pk"] = "run-1"
    keys = _VersionedKeyStore()
    keys["a.json"] = "v1"
    keys["a.json"] = "v2"
    # When they are written as a snapshot is
    out = io.BytesIO()
    dump_snapshot({"attributes": attributes, "keys": keys}, {"format": 1}, out)
    data = out.getvalue()
    # Then the snapshot names both rebuilders in shared.local.persistence, and nothing in the newer modules
    assert b"shared.local.persistence" in data and b"shared.local.snapshots" not in data
    assert b"_rebuild_limited_dict" in data and b"_rebuild_key_store" in data
    # And it reads back whole: the header, then the containers with every version
    back = io.BytesIO(data)
    assert pickle.load(back) == {"format": 1}
    state = pickle.load(back)
    assert type(state["attributes"]) is LimitedSizeDict and dict(state["attributes"]) == {"pk": "run-1"}
    assert type(state["keys"]) is _VersionedKeyStore and dict(dict.items(state["keys"])) == {"a.json": ["v1", "v2"]}


def test_sigusr1_writes_where_each_thread_is_and_the_host_goes_on_serving(tmp_path):
    import signal

    serve = ServeProcess(tmp_path, "--port", "0", "--ephemeral", name="usr1").start()
    try:
        assert serve.serving, serve.stderr[-3000:]
        serve.proc.send_signal(signal.SIGUSR1)
        eventually(lambda: "Current thread" in serve.stderr, timeout=30)  # faulthandler's dump of every thread
        assert 'File "' in serve.stderr and "Traceback" not in serve.stderr
        assert raw(serve.base_url, "GET", "/.well-known/openwop").status == 200
        assert serve.proc.poll() is None
    finally:
        assert serve.stop() == 0


def _signal_thread(pid: int, tid: int, signum: int) -> None:
    """Send ``signum`` to one thread of another process (Linux ``tgkill``; Python has no call for it)."""
    import ctypes
    import platform

    number = {"x86_64": 234, "aarch64": 131}[platform.machine()]
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.syscall(number, pid, tid, signum) == 0, ctypes.get_errno()


def test_sigterm_delivered_to_any_of_its_threads_stops_the_host(tmp_path):
    import os
    import signal

    serve = ServeProcess(tmp_path, "--port", "0", "--ephemeral", name="term-thread").start()
    try:
        assert serve.serving, serve.stderr[-3000:]
        # Given SIGTERM delivered to a thread other than the main one (the kernel may pick any thread)
        pid = serve.proc.pid
        others = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid)
        assert others
        _signal_thread(pid, others[-1], signal.SIGTERM)
        # Then the host stops, cleanly, well within the 60 s a stop is given
        assert serve.wait(timeout=30) == 0, serve.stderr[-3000:]
    finally:
        if serve.proc.poll() is None:
            serve.stop()
