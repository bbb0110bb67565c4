"""Forks of eval runs: recorded events and stored derived fixtures are re-read; no live side effect in replay."""

from __future__ import annotations

import time

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
    return [(e.payload["taskId"], e.payload["score"], e.payload["passed"], e.payload["fixtureMissCount"])
            for e in all_events(client, run_id) if e.type == "eval.scored"]


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


def test_fork_of_an_eval_run_whose_recorded_fixtures_were_erased_is_410(host):
    client = host.client(host.key_a)
    src = _eval(client, "conformance-eval-recorded-source")
    wait_terminal(client, src.runId)
    rep = _eval(client, "conformance-eval-recorded-replay", fixtureRuns={"record": src.runId})
    assert wait_terminal(client, rep.runId).status == "completed"
    # Given the replay run can be forked while its copy exists (replay: served from its own record)
    ok = client.runs_fork(rep.runId, ForkRunRequest(fromSeq=0, mode="replay"))
    assert wait_terminal(client, ok.runId, timeout=30).status == "completed"
    assert _scored(client, ok.runId) == _scored(client, rep.runId)
    # When the source is erased, its derived copies go with it
    wire = src.runId.replace("/", "~2F")
    assert raw(host.base_url, "DELETE", f"/runs/{wire}", key=host.key_a).status == 204
    deadline = time.monotonic() + 10
    while _ports().blobs.list_keys(f"derived/{src.runId}/") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _ports().blobs.list_keys(f"derived/{src.runId}/") == []
    # Then forking the eval run that used them is refused, never re-derived, never live
    r = raw(host.base_url, "POST", f"/runs/{rep.runId.replace('/', '~2F')}:fork", {"mode": "replay", "fromSeq": 0},
            key=host.key_a)
    assert r.status == 410 and r.json["error"] == "eval_recorded_fixtures_gone"
    assert src.runId not in r.text
