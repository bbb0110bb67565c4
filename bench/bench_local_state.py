"""Kept local state (``serve --data-dir``): the cost of the journal per write, and the start with stored runs.

Each figure comes from a fresh process (moto's backends are process-wide):

- write overhead: sequential DynamoDB ``PutItem`` of a 1 KiB item through boto3 on the local endpoint, in memory
  (``--ephemeral``) and journaled, median of 5 rounds of 1,000; the journal bytes per write; a whole demo run's
  journal (records and bytes);
- start with N stored runs: N runs made by recording one ``demo-support`` run (5 run-table items, 13 events, 3
  tool calls; its tool calls were real) and copying its items under N-1 new run ids straight into moto's tables,
  then a snapshot; then ``openwop-serverless serve --data-dir`` is started as a user starts it and timed until it
  prints ``Ctrl-C to stop.`` (the whole start: moto, the load, bootstrap, seeding, the demo servers, the resume scan
  over every run), with the loading alone as the host reports it, and the resident memory once serving;
- the snapshot: its size, the time to write it, and how long the fork holds the writers while the host serves.

Run: ``make bench`` (or ``.venv/bin/python -m bench.bench_local_state``). Prints figures; asserts nothing. Wall
times on a shared machine: CPU seconds are printed beside them.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

from bench.common import line

ROOT = Path(__file__).resolve().parents[1]
STORED = (1_000, 10_000)
WRITES, ROUNDS = 1_000, 5


def _child(*args: str, timeout: float = 1800) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MOTO_", "OPENWOP_"))}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "bench.bench_local_state", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise RuntimeError(f"bench child {args} failed: {done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


# -- children ---------------------------------------------------------------------------------------------------------


def _writes(kept: str) -> dict[str, Any]:
    from shared.local.stack import LocalAws

    folder = tempfile.mkdtemp(prefix="openwop-bench-")
    aws = LocalAws(data_dir=folder if kept == "kept" else None)
    aws.start()
    aws.bootstrap()
    ddb = aws.client("dynamodb")
    table = next(t for t in ddb.list_tables()["TableNames"] if t.endswith("-host"))
    pad = "x" * 1000
    rounds, cpu = [], []
    before = sum(p.stat().st_size for p in Path(folder).glob("journal-*.log"))
    for r in range(ROUNDS):
        started, used = time.perf_counter(), time.process_time()  # CPU of every thread: client and server
        for i in range(WRITES):
            ddb.put_item(TableName=table, Item={"pk": {"S": f"BENCH#{r}"}, "sk": {"S": f"{i:06d}"}, "v": {"S": pad}})
        rounds.append((time.perf_counter() - started) / WRITES * 1e6)
        cpu.append((time.process_time() - used) / WRITES * 1e6)
    after = sum(p.stat().st_size for p in Path(folder).glob("journal-*.log"))
    aws.stop()
    return {
        "us": statistics.median(rounds),
        "cpu_us": statistics.median(cpu),
        "bytes": (after - before) / (WRITES * ROUNDS) if kept == "kept" else 0,
        "folder": folder,
    }


def _journal_work() -> dict[str, Any]:
    """The journal's own work per journaled request, without moto or a client: classify, read the body, pickle the
    record, one write() to the segment (of the PutItem above)."""
    import io

    from shared.local.datadir import DataDir
    from shared.local.persistence import Journal

    folder = tempfile.mkdtemp(prefix="openwop-bench-")

    def moto(environ: dict[str, Any], start: Any) -> list[bytes]:  # stands in for moto: answers at once
        start("200 OK", [("Content-Type", "application/x-amz-json-1.0")])
        return [b"{}"]

    journal = Journal(DataDir.open(folder), moto, snapshot_bytes=1 << 40)
    journal._segment = 1
    journal._open_segment()
    body = json.dumps(
        {"TableName": "openwop-host", "Item": {"pk": {"S": "BENCH"}, "sk": {"S": "000001"}, "v": {"S": "x" * 1000}}}
    ).encode()
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/",
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "1",
        "CONTENT_TYPE": "application/x-amz-json-1.0",
        "wsgi.url_scheme": "http",
        "HTTP_HOST": "127.0.0.1:1",
        "HTTP_X_AMZ_TARGET": "DynamoDB_20120810.PutItem",
        "HTTP_AUTHORIZATION": "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/dynamodb/aws4_request, "
        "SignedHeaders=host;x-amz-date, Signature=" + "0" * 64,
        "HTTP_X_AMZ_DATE": "20260101T000000Z",
        "HTTP_USER_AGENT": "Boto3/1.44.8 md/Botocore#1.44.8 " * 3,
    }
    n = 20_000
    used = time.process_time()
    for _ in range(n):
        env = dict(environ, CONTENT_LENGTH=str(len(body)), **{"wsgi.input": io.BytesIO(body)})
        journal(env, lambda status, headers: None)
    return {"us": (time.process_time() - used) / n * 1e6}


def _replay(folder: str) -> dict[str, Any]:
    """A start on a folder with no snapshot: every journal record replayed (what a start after a crash does with
    the journal written since the last snapshot)."""
    from shared.local.stack import LocalAws

    aws = LocalAws(data_dir=folder)
    aws.start()
    found = aws.recovery
    assert found is not None
    aws.stop()
    return {
        "records": found.records,
        "seconds": found.seconds,
        "cpu": found.cpu_seconds,
        "snapshot": found.snapshot_bytes,
        "bytes": sum(p.stat().st_size for p in Path(folder).glob("journal-*.log")),
    }


def _demo_run_journal() -> dict[str, Any]:
    """One demo-support run, recorded with the journal on: what it adds to the journal."""
    aws, _, _, journaled = _recorded_demo()
    aws.stop()
    return {"bytes": journaled}


def _recorded_demo(folder: str | None = None) -> tuple[Any, str, str, int]:
    """A kept host with one recorded demo-support run: (aws, run id, folder, journal bytes the run added)."""
    from bench.common import API_KEY, TENANT, api_event, call, wait_status
    from shared.local.commands import seed
    from shared.local.ddb_streams import wait_for_stream_idle
    from shared.local.demo import start_demo
    from shared.local.stack import LocalAws
    from shared.wiring import get_ports

    folder = folder or tempfile.mkdtemp(prefix="openwop-bench-")
    aws = LocalAws(data_dir=folder)
    aws.start()
    aws.bootstrap()
    seed({API_KEY: TENANT})
    ports = get_ports()
    demo = start_demo(ports, [TENANT], 0)
    wait_for_stream_idle(30)
    journal = aws.journal
    assert journal is not None
    with journal.lock:
        before = journal.since_snapshot
    out = call(
        "create_run",
        api_event(
            "POST", "/runs", "/runs", {"workflowId": "demo-support", "inputs": {"customerId": "c-1", "city": "Oslo"}}
        ),
    )
    run_id = str(json.loads(out["body"])["runId"])
    assert wait_status(ports, run_id) == "completed"
    wait_for_stream_idle(30)
    with journal.lock:
        after = journal.since_snapshot
    demo.stop()
    return aws, run_id, folder, after - before


def _inflated(value: Any) -> str:
    """A binary value as text (a page of events is zlib-compressed JSON)."""
    return zlib.decompress(value).decode("utf-8") if isinstance(value, bytes) else str(value)


def _retarget(attrs: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """An item's attributes (DynamoDB JSON, binary as bytes) for run ``new``: ``old`` replaced everywhere, inside a
    compressed page of events too."""
    out: dict[str, Any] = {}
    for name, value in attrs.items():
        if isinstance(value.get("B"), bytes):
            out[name] = {"B": zlib.compress(zlib.decompress(value["B"]).replace(old.encode(), new.encode()))}
        else:
            out[name] = json.loads(json.dumps(value).replace(old, new))
    return out


def _store(n: int, folder: str) -> dict[str, Any]:
    """``n`` stored runs in ``folder``: one recorded demo run and n-1 copies of its items; then a snapshot."""
    from moto.dynamodb.models.dynamo_type import DynamoType, Item

    from shared.local.moto_data import backends

    aws, run_id, _, _ = _recorded_demo(folder)
    tables = backends()["dynamodb"].tables
    started = time.perf_counter()
    copied = 0
    for name in ("openwop-runs", "openwop-events", "openwop-toolcalls"):
        table = tables[name]
        mine = [item for item in table.all_items() if run_id in json.dumps(item.to_json(), default=_inflated)]
        for item in mine:
            original = item.to_json()["Attributes"]
            for i in range(1, n):
                attrs = _retarget(original, run_id, run_id[:-6] + f"{i:06d}")
                hash_key = DynamoType(attrs[table.hash_key_attr])
                range_key = DynamoType(attrs[table.range_key_attr]) if table.range_key_attr else None
                copy = Item(hash_key, range_key, attrs)
                if range_key is None:
                    table.items[hash_key] = copy
                else:
                    table.items[hash_key][range_key] = copy
                copied += 1
    made = time.perf_counter() - started
    assert aws.journal is not None
    started = time.perf_counter()
    size = aws.journal.snapshot_now()
    written = time.perf_counter() - started
    pause = _fork_pause(aws)
    aws.stop()
    return {"items": copied, "copy_s": made, "snapshot_bytes": size, "snapshot_s": written, "fork_pause_ms": pause}


def _fork_pause(aws: Any) -> float:
    """How long a background snapshot holds the writers (the lock is held from the state's capture to the fork)."""
    journal = aws.journal
    journal.request_snapshot()
    assert journal.wait_for_snapshot(timeout=1800)
    return float(journal.last_pause_ms)


# -- the parent -------------------------------------------------------------------------------------------------------


def _start(folder: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MOTO_", "OPENWOP_"))}
    env["PYTHONPATH"] = str(ROOT)
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "shared.local.commands", "serve", "--port", "0", "--data-dir", folder],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    lines = []
    assert proc.stdout is not None
    for raw_line in proc.stdout:
        lines.append(raw_line)
        if "Ctrl-C" in raw_line:
            break
    wall = time.perf_counter() - started
    rss_kb = 0
    cpu = 0.0
    try:
        status = Path(f"/proc/{proc.pid}/status").read_text()
        rss_kb = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, AttributeError):
        pass
    proc.terminate()
    proc.wait(timeout=120)
    state = next((x for x in lines if x.startswith("local state:")), "")
    loaded = re.search(r"in ([0-9.]+) s", state)
    return {"wall": wall, "cpu": cpu, "load": float(loaded.group(1)) if loaded else 0.0, "rss_mb": rss_kb / 1024}


def main() -> None:
    print("Kept local state: the journal's cost per write (PutItem, 1 KiB item, sequential, median of 5 x 1,000)")
    # alternated, three processes each: one process's figure moves by ~10% with the machine (frequency, neighbours)
    runs = [(_child("writes", "ephemeral"), _child("writes", "kept")) for _ in range(3)]
    memory = {k: statistics.median(r[0][k] for r in runs) for k in ("us", "cpu_us")}
    kept = {k: statistics.median(r[1][k] for r in runs) for k in ("us", "cpu_us", "bytes")}
    kept["folder"] = runs[-1][1]["folder"]
    line(
        "PutItem, in memory (--ephemeral)",
        f"{memory['cpu_us']:.0f}",
        f"µs CPU per request (client + moto; {memory['us']:.0f} µs wall)",
    )
    line("PutItem, journaled (--data-dir)", f"{kept['cpu_us']:.0f}", f"µs CPU per request ({kept['us']:.0f} µs wall)")
    pairs = ", ".join(f"{r[1]['cpu_us'] - r[0]['cpu_us']:+.0f}" for r in runs)
    line(
        "  overhead of keeping state, end to end",
        f"{kept['cpu_us'] - memory['cpu_us']:+.0f}",
        f"µs CPU per request ({(kept['cpu_us'] / memory['cpu_us'] - 1) * 100:+.0f}%; the three pairs: {pairs}: "
        "within what one process differs from the next here)",
    )
    line("  journal bytes per PutItem", f"{kept['bytes']:.0f}", "B")
    work = _child("journal-work")
    line(
        "  the journal's own work per write (no moto)",
        f"{work['us']:.0f}",
        "µs CPU (classify, copy the body, pickle, one write())",
    )
    replayed = _child("replay", kept["folder"])
    rate = replayed["records"] / replayed["cpu"]
    line(
        "replaying the journal at a start",
        f"{rate:,.0f}",
        f"records per CPU second ({replayed['records']:,} records, {replayed['bytes'] / 1e6:.1f} MB in "
        f"{replayed['cpu']:.1f} s CPU, {replayed['seconds']:.1f} s wall)",
    )
    from shared.local.persistence import DEFAULT_SNAPSHOT_BYTES

    line(
        f"  so a start after a crash replays at most ({DEFAULT_SNAPSHOT_BYTES >> 20} MiB of journal)",
        f"{DEFAULT_SNAPSHOT_BYTES / (replayed['bytes'] / replayed['records']) / rate:.0f}",
        "s CPU",
    )
    demo = _child("demo")
    line("one demo-support run (3 real tool calls): journal", f"{demo['bytes'] // 1024}", "KiB (all its writes)")

    print("Start of `serve --data-dir` with stored runs (each: 21 items; wall time on a shared machine)")
    for n in (0, *STORED):
        folder = tempfile.mkdtemp(prefix="openwop-bench-state-")
        made: dict[str, Any] = {}
        if n:
            made = _child("store", str(n), folder)
        got = _start(folder)
        label = f"{n:,} stored runs" if n else "empty folder"
        line(
            f"start, {label}: until it serves",
            f"{got['cpu']:.1f}",
            f"s CPU ({got['wall']:.1f} s wall), {got['rss_mb']:.0f} MB resident",
        )
        if n:
            loaded = _child("replay", folder)
            line(
                "  of which loading the folder (snapshot + journal)",
                f"{loaded['cpu']:.1f}",
                f"s CPU ({loaded['seconds']:.1f} s wall; {got['load']:.1f} s wall in the start above)",
            )
            line(
                f"  snapshot of {n:,} runs ({made['items'] + 21:,} items)",
                f"{made['snapshot_bytes'] / 1e6:.1f}",
                f"MB, written in {made['snapshot_s']:.1f} s",
            )
            line("  a background snapshot holds writers (capture + fork)", f"{made['fork_pause_ms']:.0f}", "ms")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        kind = sys.argv[1]
        if kind == "writes":
            result = _writes(sys.argv[2])
        elif kind == "journal-work":
            result = _journal_work()
        elif kind == "replay":
            result = _replay(sys.argv[2])
        elif kind == "demo":
            result = _demo_run_journal()
        else:
            result = _store(int(sys.argv[2]), sys.argv[3])
        print(json.dumps(result))
        sys.exit(0)
    main()
