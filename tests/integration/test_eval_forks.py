"""Forks of eval runs: recorded events and stored derived fixtures are re-read; no live side effect in replay."""

from __future__ import annotations

from typing import Any

import pytest
from openwop_client.types import CreateRunRequest, ForkRunRequest

from tests.wire import all_events, raw, wait_terminal

AGENT = "conformance-eval-agent"


def _ports():
    from shared.wiring import get_ports

    return get_ports()


def _count(tenant: str, key: str = "k1") -> int:
    return _ports().host.counter_read(f"COUNTER#{tenant}", key)


def _eval(client, ref, **kw):
    return client.runs_create(CreateRunRequest(mode="eval", evalSuiteRef=ref, agentId=AGENT, **kw))


def _scored(client, run_id):
    return [
        (e.payload["taskId"], e.payload["score"], e.payload["passed"], e.payload["fixtureMissCount"])
        for e in all_events(client, run_id)
        if e.type == "eval.scored"
    ]


def echo_suite(host, tasks: int, name: str) -> str:
    """A golden suite (tenant A) of ``tasks`` tasks, each one echo call, answering "0" or "1" in turn (expected "0");
    its suiteId."""
    from tests.helpers import unique
    from tests.integration.test_eval_runs import golden, put_suite, script

    body = [
        {
            "taskId": f"t{i:02d}",
            "input": script(("conformance.eval:echo", {"i": i}), answer=str(i % 2)),
            "expected": golden("0"),
        }
        for i in range(tasks)
    ]
    suite_id = "tests.local.evals." + unique(name).replace("-", "")
    assert (
        put_suite(
            host, host.key_a, {"suiteId": suite_id, "version": "1.0.0", "modes": ["golden"], "tasks": body}
        ).status
        == 201
    )
    return suite_id


def alter_score(host, run_id: str, seq: int, score: float) -> None:
    """Rewrite the recorded ``eval.scored`` at ``seq`` with another score, in the events table itself (inside the
    stored page that holds it)."""
    import json

    from shared.settings import get_settings
    from shared.storage.events import pack_page, unpack_page

    table = get_settings().events_table
    ddb = host.aws.client("dynamodb")
    item = ddb.query(
        TableName=table,
        KeyConditionExpression="runId = :r AND seq <= :s",  # pages are keyed by their first sequence
        ScanIndexForward=False,
        Limit=1,
        ExpressionAttributeValues={":r": {"S": run_id}, ":s": {"N": str(seq)}},
    )["Items"][0]
    first, docs = unpack_page(item)
    docs[seq - first]["payload"]["score"] = score
    page = pack_page(run_id, first, [json.dumps(d) for d in docs], int(item["expiresAt"]["N"]))
    ddb.put_item(TableName=table, Item=page.item)


def test_replay_fork_of_a_live_eval_run_fires_nothing_and_reproduces_it(host):
    client = host.client(host.key_a)
    src = _eval(client, "conformance-eval-recorded-source")
    assert wait_terminal(client, src.runId).status == "completed"
    before = _count("tenant-a")
    fork = client.runs_fork(src.runId, ForkRunRequest(fromSeq=0, mode="replay"))
    assert wait_terminal(client, fork.runId, timeout=30).status == "completed"
    assert _count("tenant-a") == before
    assert _scored(client, fork.runId) == _scored(client, src.runId)
    src_out = [e.payload.get("outcome") for e in all_events(client, src.runId) if e.type == "agent.tool-returned"]
    fork_events = all_events(client, fork.runId)
    assert [e.payload.get("outcome") for e in fork_events if e.type == "agent.tool-returned"] == src_out
    assert not [e for e in fork_events if e.type == "replay.diverged"]
    assert {r.source for r in _ports().tool_calls.list_calls(fork.runId)} == {"recorded"}
    summary = client.runs_eval_summary(fork.runId)
    assert summary.aggregateScore == client.runs_eval_summary(src.runId).aggregateScore


def test_branch_fork_refires_only_after_the_fork_point(host):
    client = host.client(host.key_a)
    src = _eval(client, "conformance-eval-recorded-source")
    wait_terminal(client, src.runId)
    events = all_events(client, src.runId)
    read_called = [e for e in events if e.type == "agent.tool-called"][1].sequence
    before = _count("tenant-a")
    late = client.runs_fork(src.runId, ForkRunRequest(fromSeq=read_called, mode="branch"))
    assert wait_terminal(client, late.runId, timeout=30).status == "completed"
    assert _count("tenant-a") == before  # the inc lies in the copied prefix: fixed history
    early = client.runs_fork(src.runId, ForkRunRequest(fromSeq=0, mode="branch"))
    assert wait_terminal(client, early.runId, timeout=30).status == "completed"
    assert _count("tenant-a") == before + 1  # a branch from 0 re-fires the inc


@pytest.mark.parametrize("large", [False, True], ids=["plan-item", "plan-object"])
def test_fork_of_an_eval_run_whose_recorded_fixtures_were_erased_is_410(host, monkeypatch, large):
    from shared.engine import evalplan
    from shared.local.ddb_streams import wait_for_stream_idle

    if large:  # its plan an S3 object, the item naming it (decision 0188)
        monkeypatch.setattr(evalplan, "INLINE_LIMIT", 100)
    client = host.client(host.key_a)
    src = _eval(client, "conformance-eval-recorded-source")
    wait_terminal(client, src.runId)
    rep = _eval(client, "conformance-eval-recorded-replay", fixtureRuns={"record": src.runId})
    assert wait_terminal(client, rep.runId).status == "completed"
    # Given the replay run can be forked while its copy exists (replay: served from its own record)
    ok = client.runs_fork(rep.runId, ForkRunRequest(fromSeq=0, mode="replay"))
    assert wait_terminal(client, ok.runId, timeout=30).status == "completed"
    assert _scored(client, ok.runId) == _scored(client, rep.runId)
    # When its derived copies are gone (the source's erasure deletes them first, before it reaches the eval run)
    assert _ports().blobs.delete_prefix(f"derived/{src.runId}/") == 1
    # Then forking the eval run that used them is refused, never re-derived, never live, and so is forking its fork,
    # which reads the same copies (it owns none)
    for run_id in (rep.runId, ok.runId):
        r = raw(
            host.base_url,
            "POST",
            f"/runs/{run_id.replace('/', '~2F')}:fork",
            {"mode": "replay", "fromSeq": 0},
            key=host.key_a,
        )
        assert r.status == 410 and r.json["error"] == "eval_recorded_fixtures_gone", run_id
        assert src.runId not in r.text
    # and once the source's erasure is done, the eval run and its fork are gone with it (decision 0108)
    wire = src.runId.replace("/", "~2F")
    assert raw(host.base_url, "DELETE", f"/runs/{wire}", key=host.key_a).status == 204
    assert wait_for_stream_idle(30)
    for run_id in (rep.runId, ok.runId):
        assert raw(host.base_url, "GET", f"/runs/{run_id.replace('/', '~2F')}", key=host.key_a).status == 404


def test_a_large_eval_forks_in_pages_and_reports_one_divergence_across_them(host, monkeypatch):
    """Forks of an eval re-run its trials a page of whole tasks at a time (the eval's Finish page size, 3 trials
    here): a replay from 0 reproduces the log, a branch from inside the second page appends only after its prefix,
    and a replay of a source whose log was altered reports one divergence and numbers the later pages after it."""
    from shared.keys import run_prefix
    from shared.settings import get_settings
    from tests.integration.test_eval_runs import eval_request

    suite_id = echo_suite(host, 10, "pages")
    client = host.client(host.key_a)
    monkeypatch.setenv("EVAL_FINISH_PAGE_TRIALS", "3")
    get_settings.cache_clear()
    try:
        src = client.runs_create(eval_request(f"{suite_id}@1.0.0")).runId
        assert wait_terminal(client, src, timeout=60).status == "completed"
        source = all_events(client, src)
        replay = client.runs_fork(src, ForkRunRequest(fromSeq=0, mode="replay")).runId
        assert wait_terminal(client, replay, timeout=60).status == "completed"
        inside = [e.sequence for e in source if e.type == "eval.scored"][4]  # the second page's middle task
        branch = client.runs_fork(src, ForkRunRequest(fromSeq=inside, mode="branch")).runId
        assert wait_terminal(client, branch, timeout=60).status == "completed"
        # alter what the source recorded for the eighth task (page three): the replay must notice it there
        altered = [e.sequence for e in source if e.type == "eval.scored"][7]
        alter_score(host, src, altered, 0.5)
        diverged = client.runs_fork(src, ForkRunRequest(fromSeq=0, mode="replay")).runId
        assert wait_terminal(client, diverged, timeout=60).status == "completed"
    finally:
        monkeypatch.delenv("EVAL_FINISH_PAGE_TRIALS")
        get_settings.cache_clear()

    def shape(events):
        return [(e.type, e.payload.get("taskId"), e.payload.get("score")) for e in events]

    # the replay reproduces every event in order, with no divergence and the source's summary
    got = all_events(client, replay)
    assert [e.sequence for e in got] == list(range(len(source)))
    assert shape(got) == shape(source) and not [e for e in got if e.type == "replay.diverged"]
    assert client.runs_eval_summary(replay).aggregateScore == client.runs_eval_summary(src).aggregateScore == 0.5
    # the branch holds the source's prefix and re-ran the rest: the same shape, one log without gaps
    got = all_events(client, branch)
    assert [e.sequence for e in got] == list(range(len(source))) and shape(got) == shape(source)
    assert [e.eventId for e in got[inside:]] != [e.eventId for e in source[inside:]]
    # the altered source: one divergence, at the altered event, and every later event one sequence further on
    got = all_events(client, diverged)
    marks = [e for e in got if e.type == "replay.diverged"]
    assert len(marks) == 1 and marks[0].sequence == altered + 1
    assert (marks[0].payload["atSequence"], marks[0].payload["divergenceKind"]) == (altered, "output")
    assert marks[0].payload["originalEventId"] == source[altered].eventId
    assert [e.sequence for e in got] == list(range(len(source) + 1))
    assert shape([e for e in got if e.type != "replay.diverged"]) == shape(source[:altered]) + [
        ("eval.scored", "t07", 0.0)
    ] + shape(source[altered + 1 :])
    # four pages each (3 + 3 + 3 + 1 tasks): the first three kept their rows under the child for the last one
    s3 = host.aws.client("s3")
    for child in (replay, branch, diverged):
        listed = s3.list_objects_v2(Bucket=get_settings().fixtures_bucket, Prefix=f"{run_prefix(child)}eval-rows/")
        assert sorted(o["Key"].rsplit("/", 1)[1] for o in listed.get("Contents", [])) == [
            "00000.json",
            "00003.json",
            "00006.json",
        ], child


def test_a_page_moves_the_cursor_without_ending_the_run_and_the_last_page_may_append_nothing(host):
    """``append_chunked``: a page's cursor update leaves the run running (no ``completedAt``); an update with no
    event is still written (a fork page wholly inside its prefix, or a last page with nothing left to append)."""
    from shared.engine import evalpages, kernel
    from shared.ports import RunRecord
    from shared.services.common import Caller
    from tests.helpers import unique

    ports = _ports()
    # a tenant no API key names, so no listing of the suite's tenants ever shows this bare record
    tenant = "tenant-appendpages"
    run_id = f"{tenant}/{unique('r-pages')}"
    ports.runs.create_run(
        RunRecord(
            run_id=run_id,
            tenant=tenant,
            status="running",
            last_seq=-1,
            created_at=ports.clock.iso(),
            data={"kind": "eval", "workflowId": "conformance-eval", "owner": Caller(tenant, "key-pages").owner},
            expires_at=ports.clock.now_ms() // 1000 + 3600,
        )
    )
    rec = ports.runs.get_run(run_id)
    events = [kernel.make_event(ports, run_id, n, "run.started", {"n": n}, None) for n in range(3)]
    evalpages.append_chunked(ports, rec, events, {"cursor": {"task": 3, "pos": 3, "diverged": False}})
    rec = ports.runs.get_run(run_id)
    assert (rec.status, rec.last_seq, rec.cursor, rec.completed_at) == (
        "running",
        2,
        {"task": 3, "pos": 3, "diverged": False},
        None,
    )
    evalpages.append_chunked(ports, rec, [], {"cursor": {"task": 5, "pos": 3, "diverged": False}})
    rec = ports.runs.get_run(run_id)
    assert (rec.last_seq, rec.cursor["task"], rec.completed_at) == (2, 5, None)
    evalpages.append_chunked(ports, rec, [], {"status": "completed", "completedAt": "2026-01-01T00:00:00.000Z"})
    rec = ports.runs.get_run(run_id)
    assert (rec.status, rec.last_seq, rec.completed_at) == ("completed", 2, "2026-01-01T00:00:00.000Z")


def test_a_fork_of_an_eval_with_a_large_plan_copies_it_within_the_store(host, monkeypatch):
    # Given an eval run that used derived fixture copies, its plan stored as an S3 object (every plan is "large" here)
    from urllib.parse import unquote

    from shared.engine import evalplan
    from shared.keys import EVAL_PLAN_SK, run_prefix
    from shared.services.erasure import erase_now
    from tests.helpers import hooked

    monkeypatch.setattr(evalplan, "INLINE_LIMIT", 100)
    client = host.client(host.key_a)
    src = _eval(client, "conformance-eval-recorded-source")
    assert wait_terminal(client, src.runId).status == "completed"
    rep = _eval(client, "conformance-eval-recorded-replay", fixtureRuns={"record": src.runId})
    assert wait_terminal(client, rep.runId).status == "completed"
    ports = _ports()
    source_item = ports.runs.get_aux(rep.runId, EVAL_PLAN_SK)
    source_key = source_item["planBlob"]
    assert source_item["derivedKeys"]  # the copies it owns
    # When it is forked, every S3 read and copy recorded until the fork has ended
    seen: list[tuple[str, dict]] = []

    def note(op):
        return lambda params=None, **_: seen.append((op, dict(params)))

    s3 = ports.blobs._c
    with hooked(s3, {f"before-parameter-build.s3.{op}": note(op) for op in ("GetObject", "CopyObject")}):
        fork = client.runs_fork(rep.runId, ForkRunRequest(fromSeq=0, mode="replay"))
        assert wait_terminal(client, fork.runId, timeout=30).status == "completed"
    # Then its plan object is a copy made within the store (decision 0188): the source's plan is never read, the
    # fork's item names the copy and owns none of the source's derived copies
    child_key = f"{run_prefix(fork.runId)}eval-plan.json"

    def copied_from(source: Any) -> str:  # botocore has made the dict "bucket/key", quoted, by now
        return str(source["Key"]) if isinstance(source, dict) else unquote(str(source).split("?")[0]).split("/", 1)[1]

    assert [copied_from(p["CopySource"]) for op, p in seen if op == "CopyObject"] == [source_key]
    assert [p["Key"] for op, p in seen if op == "CopyObject"] == [child_key]
    assert source_key not in [p["Key"] for op, p in seen if op == "GetObject"]
    assert ports.runs.get_aux(fork.runId, EVAL_PLAN_SK) == {
        "v": source_item["v"],
        "planBlob": child_key,
        "derivedKeys": [],  # it owns none
        "derivedRead": source_item["derivedKeys"],  # it reads its source's
    }
    # and it replays the source (its trials served from the copies the source owns)
    assert _scored(client, fork.runId) == _scored(client, rep.runId)
    # and erasing the fork leaves the source's plan and copies whole
    erase_now(ports, fork.runId)
    assert ports.blobs.get_json(child_key) is None
    assert ports.blobs.get_json(source_key) is not None
    assert all(ports.blobs.list_keys(key) for key in source_item["derivedKeys"])
