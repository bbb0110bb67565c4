"""Eval suites as a tenant's resource (issue 24): listing, reading and deleting versions, isolation; tasks that
carry their source run (served from its record, checked at registration, tombstoned when it is erased); suites
built from recorded runs with ``:from-runs``. A real loopback tool server counts every live hit."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from openwop_client.types import CreateRunRequest

from shared.protocol.ids import project_id
from shared.services import suites
from shared.services.suite_runs import task_id_for
from tests.helpers import ports as _ports
from tests.wire import all_events, raw, wait_terminal
from tests.workflows import register_lookup_tool, register_scripted_agent

BASE = "/host/openwop-serverless"
SUITES = f"{BASE}/eval-suites"
AGENT = "conformance-eval-agent"


def _suite_id() -> str:
    return f"tests.local.evals.s{uuid.uuid4().hex[:10]}"


def _recorded_runs(
    client: Any, workflow_id: str, tool_id: str, n: int, *, metadata: dict[str, Any] | None = None
) -> list[str]:
    """``n`` completed runs of the scripted agent, each looking one customer up and answering with its id."""
    out = []
    for i in range(n):
        script = {"calls": [{"tool": tool_id, "args": {"customerId": f"c-{i}"}}], "answer": f"answer-{i}"}
        run = client.runs_create(CreateRunRequest(workflowId=workflow_id, inputs={"script": script}, metadata=metadata))
        out.append(run.runId)
    for run_id in out:
        assert wait_terminal(client, run_id, timeout=120).status == "completed"
    return out


def _from_runs(host: Any, key: str, suite_id: str, body: dict[str, Any]) -> Any:
    return raw(host.base_url, "POST", f"{SUITES}/{suite_id}:from-runs", body, key=key)


def _eval(client: Any, ref: str, **kw: Any) -> str:
    run = client.runs_create(CreateRunRequest(mode="eval", evalSuiteRef=ref, agentId=AGENT, **kw))
    assert wait_terminal(client, run.runId, timeout=180).status == "completed"
    return run.runId


def _summary(host: Any, run_id: str) -> dict[str, Any]:
    r = raw(host.base_url, "GET", f"/runs/{project_id(run_id)}/eval-summary", key=host.key_a)
    assert r.status == 200, r.text
    return r.json


def _evaluated_from_sources(host: Any, recorded: dict[str, Any], ref: str, tasks: int) -> tuple[str, dict[str, Any]]:
    """An eval of ``ref`` with no fixtureRuns: every task passed with no miss, the tool server saw no request, and
    eval.started names no fixtureRuns. The run and its report (one page)."""
    client = host.client(host.key_a)
    before = recorded["tools"].count()
    run = _eval(client, ref)
    assert recorded["tools"].count() == before
    summary = _summary(host, run)
    assert len(summary["tasks"]) == tasks
    assert all((t["passed"], t["fixtureMissCount"]) == (True, 0) for t in summary["tasks"])
    started = [e.payload for e in all_events(client, run) if e.type == "eval.started"][0]
    assert "fixtureRuns" not in started and started["taskCount"] == tasks
    return run, raw(host.base_url, "GET", f"{BASE}/runs/{project_id(run)}/eval-report?limit=1000", key=host.key_a).json


@pytest.fixture(scope="module")
def recorded(host, server):
    """Tenant A's recorded runs of one workflow calling a loopback tool, and the tool server."""
    tools, url = server
    tool_id = register_lookup_tool(host, url)
    workflow_id = register_scripted_agent("tenant-a", "recorded")
    client = host.client(host.key_a)
    runs = _recorded_runs(client, workflow_id, tool_id, 50, metadata={"batch": "b1"})
    return {"tools": tools, "tool": tool_id, "workflowId": workflow_id, "runs": runs}


def test_a_from_runs_suite_evaluates_with_no_fixture_runs_and_no_live_hit(host, recorded):
    suite_id = _suite_id()
    # Given a suite built from 50 recorded runs selected by a filter
    r = _from_runs(host, host.key_a, suite_id, {"agentId": AGENT, "workflowId": recorded["workflowId"], "limit": 50})
    assert r.status == 201, r.text
    assert r.json == {
        "suiteId": suite_id,
        "version": "1.0.0",
        "evalSuiteRef": f"{suite_id}@1.0.0",
        "taskCount": 50,
        "addedCount": 50,
    }
    doc = raw(host.base_url, "GET", f"{SUITES}/{suite_id}/versions/1.0.0", key=host.key_a).json
    by_source = {t["sourceRunId"]: t for t in doc["tasks"]}
    assert set(by_source) == set(recorded["runs"]) and doc["targetAgentId"] == AGENT
    first = by_source[recorded["runs"][0]]
    # its taskId names the run without holding its id (a tombstoned task keeps nothing of an erased run's id)
    assert first["taskId"] == task_id_for(recorded["runs"][0]) and re.fullmatch(r"run-[0-9a-f]{26}", first["taskId"])
    assert recorded["runs"][0].partition("/")[2].lower() not in first["taskId"]
    assert len({t["taskId"] for t in doc["tasks"]}) == 50
    assert first["input"] == {
        "calls": [{"tool": recorded["tool"], "args": {"customerId": "c-0"}}],
        "answer": "answer-0",
    }
    assert first["expected"] == {"kind": "golden", "match": {"strategy": "exact", "value": "answer-0"}}
    assert suites.validate_suite(doc) == doc  # every task built from a run is one the suite schema takes
    # When it is evaluated with no fixtureRuns, then every task passes from its own source's record, no live hit
    run, report = _evaluated_from_sources(host, recorded, f"{suite_id}@1.0.0", 50)
    assert {c.source for c in _ports().tool_calls.list_calls(run)} == {"fixture"}
    # and the report names each task's source
    assert {t["servedFrom"] for t in report["tasks"]} == set(recorded["runs"])


def _task(task_id: str, tool: str, customer: str, answer: str, source: str) -> dict[str, Any]:
    return {
        "taskId": task_id,
        "input": {"calls": [{"tool": tool, "args": {"customerId": customer}}], "answer": answer},
        "expected": {"kind": "golden", "match": {"strategy": "exact", "value": answer}},
        "sourceRunId": source,
    }


def _sources(client: Any, tool_id: str, n: int, recorded_n: int = 3) -> list[str]:
    """``n`` recorded runs of a workflow of their own (so no other test's filter selects them): ``recorded_n`` through
    the API, run k looking customer ``c-<k % recorded_n>`` up; the rest copies of them, run k of run k % recorded_n."""
    from tests.workflows import copy_recorded_runs

    recorded = _recorded_runs(client, register_scripted_agent("tenant-a", "copied"), tool_id, recorded_n)
    return recorded + copy_recorded_runs(recorded, n - recorded_n)


def test_a_suite_of_more_than_200_source_tasks_registers_and_evaluates_with_no_fixture_runs(host, recorded):
    client = host.client(host.key_a)
    # Given 201 recorded runs (3 through the API, 198 copies of them)
    sources = _sources(client, recorded["tool"], 201)
    # and a suite registered with one task per run, each naming its run (the 200 cap of fixtureRuns is not theirs)
    suite_id = _suite_id()
    tasks = [
        _task(f"t{k:03d}", recorded["tool"], f"c-{k % 3}", f"answer-{k % 3}", run) for k, run in enumerate(sources)
    ]
    doc = {"suiteId": suite_id, "version": "1.0.0", "modes": ["golden"], "targetAgentId": AGENT, "tasks": tasks}
    r = raw(host.base_url, "POST", SUITES, doc, key=host.key_a)
    assert r.status == 201, r.text
    # When it is evaluated with no fixtureRuns, then each of the 201 tasks passes from its own source, no live hit
    run, report = _evaluated_from_sources(host, recorded, f"{suite_id}@1.0.0", 201)
    assert {t["taskId"]: t["servedFrom"] for t in report["tasks"]} == {t["taskId"]: t["sourceRunId"] for t in tasks}
    # and every source is linked under the eval run's id, so erasing any of them erases the eval (decision 0108)
    assert all(_ports().runs.get_aux(source, f"CHILD#{run}") == {"runId": run} for source in sources)


def test_a_version_too_large_for_one_item_is_stored_in_pages_evaluated_and_tombstoned_in_place(host, recorded):
    import base64
    import os

    from shared.local.ddb_streams import wait_for_stream_idle

    client = host.client(host.key_a)
    sources = _sources(client, recorded["tool"], 3, 1)
    # Given a suite of three source tasks, each carrying ~270 KB that does not compress (over one item's 400 KB)
    suite_id = _suite_id()
    tasks = [_task(f"t{k}", recorded["tool"], "c-0", "answer-0", run) for k, run in enumerate(sources)]
    for t in tasks:
        t["input"]["memo"] = base64.b64encode(os.urandom(200_000)).decode()
    doc = {"suiteId": suite_id, "version": "1.0.0", "modes": ["golden"], "targetAgentId": AGENT, "tasks": tasks}
    assert raw(host.base_url, "POST", SUITES, doc, key=host.key_a).status == 201
    # Then it is stored as a head naming its pages, and read back whole
    ref = f"{suite_id}@1.0.0"
    pages = _ports().host.query("SUITEPAGE#tenant-a", f"{ref}#", consistent=True)
    assert len(pages) >= 2 and "tasks" not in _ports().host.get_item("SUITE#tenant-a", ref)
    assert raw(host.base_url, "GET", f"{SUITES}/{suite_id}/versions/1.0.0", key=host.key_a).json == doc
    # and it evaluates: each task served from its own source
    run = _eval(client, ref)
    assert [(t["passed"], t["fixtureMissCount"]) for t in _summary(host, run)["tasks"]] == [(True, 0)] * 3
    # When one source is erased, its task is tombstoned in the page holding it; the others keep theirs
    assert raw(host.base_url, "DELETE", f"/runs/{project_id(sources[1])}", key=host.key_a).status == 204
    assert wait_for_stream_idle(20)
    got = raw(host.base_url, "GET", f"{SUITES}/{suite_id}/versions/1.0.0", key=host.key_a).json
    assert got["tasks"] == [tasks[0], {"taskId": "t1", "tombstoned": True}, tasks[2]]
    assert not any(sources[1] in str(page) for _, page in _ports().host.query("SUITEPAGE#tenant-a", f"{ref}#"))
    # and deleting the version (its eval erased with the source) removes its pages too
    assert raw(host.base_url, "DELETE", f"{SUITES}/{suite_id}/versions/1.0.0", key=host.key_a).status == 204
    assert _ports().host.query("SUITEPAGE#tenant-a", f"{ref}#", consistent=True) == []


def test_fixture_runs_overrides_a_tasks_source_run(host):
    client = host.client(host.key_a)
    workflow_id = register_scripted_agent("tenant-a", "override")
    key = f"k-{uuid.uuid4().hex[:8]}"
    script = {"calls": [{"tool": "conformance.eval:counter", "args": {"op": "inc", "key": key}}], "answer": "done"}
    # Given two recorded runs making the same counter call, one after the other (two runs started together race to
    # the counter): the first saw count 1, the second count 2
    recorded = []
    for _ in range(2):
        run_id = client.runs_create(CreateRunRequest(workflowId=workflow_id, inputs={"script": script})).runId
        assert wait_terminal(client, run_id).status == "completed"
        recorded.append(run_id)
    first, second = recorded
    # and a suite whose one task names the first as its source
    suite_id = _suite_id()
    doc = {
        "suiteId": suite_id,
        "version": "1.0.0",
        "modes": ["golden"],
        "targetAgentId": AGENT,
        "tasks": [
            {
                "taskId": "count",
                "input": script,
                "sourceRunId": first,
                "expected": {"kind": "golden", "match": {"strategy": "exact", "value": "done"}},
            }
        ],
    }
    assert raw(host.base_url, "POST", SUITES, doc, key=host.key_a).status == 201

    def served(run_id: str) -> list[Any]:
        return [e.payload["outcome"] for e in all_events(client, run_id) if e.type == "agent.tool-returned"]

    # When it is evaluated as it is, and with fixtureRuns naming the second run for that task
    plain = _eval(client, f"{suite_id}@1.0.0")
    override = _eval(client, f"{suite_id}@1.0.0", fixtureRuns={"count": second})
    # Then the first is served its source's answer and the second the override's, each with no miss
    assert served(plain) == [{"key": key, "count": 1}]
    assert served(override) == [{"key": key, "count": 2}]
    assert [t["fixtureMissCount"] for t in _summary(host, override)["tasks"]] == [0]
    started = [e.payload for e in all_events(client, override) if e.type == "eval.started"][0]
    assert started["fixtureRuns"] == {"count": second}
    report = raw(host.base_url, "GET", f"{BASE}/runs/{project_id(override)}/eval-report", key=host.key_a).json
    assert [t["servedFrom"] for t in report["tasks"]] == [second]
    # and the live counter did not move: neither eval reached it
    assert _ports().host.counter_read("COUNTER#tenant-a", key) == 2


def _listed(host: Any, key: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cursor = None
    for _ in range(100):
        page = raw(host.base_url, "GET", f"{SUITES}?limit=100" + (f"&cursor={cursor}" if cursor else ""), key=key)
        assert page.status == 200, page.text
        out.extend(page.json["suites"])
        cursor = page.json.get("nextCursor")
        if not cursor:
            return out
    raise AssertionError("the listing did not end")


def test_a_base_whose_task_names_a_run_under_another_taskid_does_not_get_that_run_twice(host, recorded):
    suite_id = _suite_id()
    runs = recorded["runs"]
    # Given a version whose one task names run 0 as its source under a taskId of its own (as versions written before
    # taskIds were derived from the run's id do)
    doc = {
        "suiteId": suite_id,
        "version": "1.0.0",
        "modes": ["golden"],
        "targetAgentId": AGENT,
        "tasks": [_task("legacy-name", recorded["tool"], "c-0", "answer-0", runs[0])],
    }
    assert raw(host.base_url, "POST", SUITES, doc, key=host.key_a).status == 201
    # When runs 0 and 1 are added to it
    r = _from_runs(host, host.key_a, suite_id, {"runIds": runs[:2], "base": "latest"})
    # Then only run 1 is added: run 0 is there already, under its old taskId
    assert r.status == 201, r.text
    assert (r.json["taskCount"], r.json["addedCount"]) == (2, 1)
    got = raw(host.base_url, "GET", f"{SUITES}/{suite_id}/versions/{r.json['version']}", key=host.key_a).json
    assert [(t["taskId"], t["sourceRunId"]) for t in got["tasks"]] == [
        ("legacy-name", runs[0]),
        (task_id_for(runs[1]), runs[1]),
    ]


def test_suites_are_listed_read_and_isolated_with_identical_404s(host, recorded):
    suite_id = _suite_id()
    runs = recorded["runs"]
    # Given two versions of tenant A's suite: one from two named runs, the next appending a third to it
    assert _from_runs(host, host.key_a, suite_id, {"agentId": AGENT, "runIds": runs[:2]}).status == 201
    r = _from_runs(host, host.key_a, suite_id, {"runIds": [runs[1], runs[2]], "base": "latest"})
    assert r.status == 201, r.text
    assert (r.json["version"], r.json["taskCount"], r.json["addedCount"]) == ("1.1.0", 3, 1)
    # Then the tenant lists it with its versions and latest task count, and reads each version
    mine = [s for s in _listed(host, host.key_a) if s["suiteId"] == suite_id]
    assert len(mine) == 1 and mine[0]["versions"] == ["1.0.0", "1.1.0"] and mine[0]["taskCount"] == 3
    got = raw(host.base_url, "GET", f"{SUITES}/{suite_id}", key=host.key_a)
    assert got.status == 200
    assert [(i["version"], i["taskCount"], i["evalSuiteRef"]) for i in got.json["items"]] == [
        ("1.0.0", 2, f"{suite_id}@1.0.0"),
        ("1.1.0", 3, f"{suite_id}@1.1.0"),
    ]
    v1 = raw(host.base_url, "GET", f"{SUITES}/{suite_id}/versions/1.1.0", key=host.key_a).json
    assert [t["sourceRunId"] for t in v1["tasks"]] == runs[:3]
    # and tenant B sees none of it: the same 404 bytes as an unknown or malformed id
    assert suite_id not in [s["suiteId"] for s in _listed(host, host.key_b)]
    unknown = raw(host.base_url, "GET", f"{SUITES}/{_suite_id()}", key=host.key_b)
    assert unknown.status == 404 and unknown.json["error"] == "not_found"
    for path in (
        f"{SUITES}/{suite_id}",
        f"{SUITES}/{suite_id}/versions/1.0.0",
        f"{SUITES}/not-a-suite",
        f"{SUITES}/{suite_id}/versions/x",
    ):
        foreign = raw(host.base_url, "GET", path, key=host.key_b)
        assert (foreign.status, foreign.text) == (404, unknown.text), path
    deleted = raw(host.base_url, "DELETE", f"{SUITES}/{suite_id}/versions/1.0.0", key=host.key_b)
    assert (deleted.status, deleted.text) == (404, unknown.text)
    assert raw(host.base_url, "GET", f"{SUITES}/{suite_id}/versions/1.0.0", key=host.key_a).status == 200


def _plain_suite(suite_id: str, version: str, tasks: int) -> dict[str, Any]:
    return {
        "suiteId": suite_id,
        "version": version,
        "modes": ["golden"],
        "tasks": [
            {
                "taskId": f"t{i}",
                "input": {"calls": [], "answer": "a"},
                "expected": {"kind": "golden", "match": {"strategy": "exact", "value": "a"}},
            }
            for i in range(tasks)
        ],
    }


@pytest.fixture(scope="module")
def own_tenant(host):
    """A tenant of this module's own (no other test's suites in its listing): (its key, five suites by id, each
    with its versions and task counts), registered over HTTP; the first two have a second version."""
    from shared.services import auth

    tenant = f"tenant-{uuid.uuid4().hex[:10]}"
    key, _ = auth.create_api_key(_ports(), tenant, "suite-list")
    made: dict[str, list[tuple[str, int]]] = {}
    for n in range(5):
        sid = f"tests.list.evals.s{n}-{uuid.uuid4().hex[:6]}"
        made[sid] = [("1.0.0", n + 1)] + ([("1.1.0", n + 3)] if n < 2 else [])
        for version, count in made[sid]:
            r = raw(host.base_url, "POST", SUITES, _plain_suite(sid, version, count), key=key)
            assert r.status == 201, r.text
    return tenant, key, made


def test_the_suite_list_pages_by_a_signed_cursor_to_its_end(host, own_tenant):
    tenant, key, made = own_tenant
    # Given five suites of one tenant, two of them with a second version
    # When the list is walked two suites a page
    pages, cursor = [], None
    for _ in range(10):
        r = raw(host.base_url, "GET", f"{SUITES}?limit=2" + (f"&cursor={cursor}" if cursor else ""), key=key)
        assert r.status == 200, r.text
        pages.append(r.json["suites"])
        cursor = r.json.get("nextCursor")
        if cursor is None:
            break
        assert tenant not in cursor and "tests.list" not in cursor  # opaque
    # Then it ends after three pages holding exactly the five suites in suiteId order, each with its versions, its
    # latest version's task count and its first version's createdAt
    assert [len(p) for p in pages] == [2, 2, 1]
    index = _ports().host
    expected = [
        {
            "suiteId": sid,
            "versions": [v for v, _ in versions],
            "taskCount": versions[-1][1],
            "createdAt": index.get_item(f"SUITEIDX#{tenant}", f"{sid}@1.0.0")["createdAt"],
        }
        for sid, versions in sorted(made.items())
    ]
    assert [s for p in pages for s in p] == expected
    first = expected[0]
    assert first["createdAt"] <= index.get_item(f"SUITEIDX#{tenant}", f"{first['suiteId']}@1.1.0")["createdAt"]
    assert first["createdAt"].endswith("Z") and first["createdAt"][:2] == "20"
    # and a version deleted leaves the list (the last one takes its suite with it)
    last = expected[-1]["suiteId"]
    assert raw(host.base_url, "DELETE", f"{SUITES}/{last}/versions/1.0.0", key=key).status == 204
    assert raw(host.base_url, "DELETE", f"{SUITES}/{expected[0]['suiteId']}/versions/1.1.0", key=key).status == 204
    whole = raw(host.base_url, "GET", f"{SUITES}?limit=100", key=key).json
    assert "nextCursor" not in whole
    assert whole["suites"] == [{**expected[0], "versions": ["1.0.0"], "taskCount": 1}, *expected[1:4]]
    assert raw(host.base_url, "POST", SUITES, _plain_suite(last, "1.0.0", 5), key=key).status == 201


def test_a_page_of_the_suite_list_is_one_query(host, own_tenant):
    import json as _json

    from shared.services import suites

    tenant, _key, made = own_tenant
    client = _ports().host._c
    sent: list[dict[str, Any]] = []

    def on_send(request: Any = None, **_: Any) -> None:
        sent.append(_json.loads(request.body or b"{}"))

    # When the second page of three suites a page is read
    first = suites.list_suites(_ports(), tenant, {"limit": "3"})
    client.meta.events.register("before-send.dynamodb.Query", on_send)
    try:
        second = suites.list_suites(_ports(), tenant, {"limit": "3", "cursor": first["nextCursor"]})
    finally:
        client.meta.events.unregister("before-send.dynamodb.Query", on_send)
    # Then it is one Query of the tenant's listing rows, from the first page's last suite, one row past the page
    assert [q["ExpressionAttributeValues"][":p"]["S"] for q in sent] == [f"SUITELIST#{tenant}"]
    assert sent[0]["Limit"] == 4
    assert sent[0]["ExclusiveStartKey"]["sk"]["S"] == first["suites"][-1]["suiteId"]
    assert [s["suiteId"] for s in first["suites"] + second["suites"]] == sorted(made)
    assert "nextCursor" not in second


def test_a_suite_list_cursor_is_refused_like_a_runs_cursor(host, own_tenant):
    import base64
    import json as _json

    from shared.services.cursors import mint_cursor

    tenant, key, _made = own_tenant
    page = raw(host.base_url, "GET", f"{SUITES}?limit=1", key=key).json
    cursor = page["nextCursor"]
    doc = _json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    flipped = (
        base64.urlsafe_b64encode(
            _json.dumps({**doc, "m": ("0" if doc["m"][0] != "0" else "1") + doc["m"][1:]}).encode()
        )
        .decode()
        .rstrip("=")
    )
    runs_cursor = mint_cursor(
        _ports(), tenant, {"pk": f"{tenant}/r-x", "sk": "RUN", "gsi1pk": tenant, "gsi1sk": "2026-01-01T00:00:00.000Z#x"}
    )
    # Given another tenant's cursor, a forged one, an empty one, garbage, and the tenant's own cursor of GET /runs
    for name, bad, who in (
        ("foreign", cursor, host.key_b),
        ("forged", flipped, key),
        ("empty", "", key),
        ("garbage", "not*a*cursor", key),
    ):
        # When each is presented to the suite list and to GET /runs
        suites_answer = raw(host.base_url, "GET", f"{SUITES}?cursor={bad}", key=who)
        runs_answer = raw(host.base_url, "GET", f"/runs?cursor={bad}", key=who)
        # Then the suite list refuses it with the very bytes GET /runs answers
        assert (suites_answer.status, suites_answer.json["error"]) == (400, "validation_error"), name
        assert (suites_answer.status, suites_answer.text) == (runs_answer.status, runs_answer.text), name
        assert "tests.list" not in suites_answer.text
    # and a genuine cursor of another listing is refused as a forged one
    assert raw(host.base_url, "GET", f"/runs?cursor={runs_cursor}", key=key).status == 200
    other = raw(host.base_url, "GET", f"{SUITES}?cursor={runs_cursor}", key=key)
    assert (other.status, other.text) == (400, raw(host.base_url, "GET", f"{SUITES}?cursor={flipped}", key=key).text)


def test_a_version_an_eval_run_references_is_not_deleted(host, recorded):
    from shared.local.ddb_streams import wait_for_stream_idle

    client = host.client(host.key_a)
    suite_id = _suite_id()
    assert _from_runs(host, host.key_a, suite_id, {"agentId": AGENT, "runIds": recorded["runs"][3:4]}).status == 201
    assert _from_runs(host, host.key_a, suite_id, {"agentId": AGENT, "runIds": recorded["runs"][4:5]}).status == 201
    # Given an eval run of version 1.0.0
    run = _eval(client, f"{suite_id}@1.0.0")
    # Then deleting 1.0.0 is refused naming it, while 1.1.0 (never run) is deleted
    refused = raw(host.base_url, "DELETE", f"{SUITES}/{suite_id}/versions/1.0.0", key=host.key_a)
    assert (refused.status, refused.json["error"]) == (409, "version_conflict")
    assert refused.json["details"] == {"runIds": [run]}
    assert raw(host.base_url, "DELETE", f"{SUITES}/{suite_id}/versions/1.1.0", key=host.key_a).status == 204
    assert raw(host.base_url, "GET", f"{SUITES}/{suite_id}/versions/1.1.0", key=host.key_a).status == 404
    # and once the eval run is erased, 1.0.0 goes too, and the suite with it
    assert raw(host.base_url, "DELETE", f"/runs/{project_id(run)}", key=host.key_a).status == 204
    assert wait_for_stream_idle(20)
    assert raw(host.base_url, "DELETE", f"{SUITES}/{suite_id}/versions/1.0.0", key=host.key_a).status == 204
    assert raw(host.base_url, "GET", f"{SUITES}/{suite_id}", key=host.key_a).status == 404
    assert _ports().host.get_item("SUITE#tenant-a", f"{suite_id}@1.0.0") is None


def test_unusable_sources_are_refused_uniformly_and_nothing_is_written(host, recorded):
    client_b = host.client(host.key_b)
    workflow_b = register_scripted_agent("tenant-b", "recorded-b")
    foreign = _recorded_runs(client_b, workflow_b, "conformance.eval:echo", 1)[0]
    noop = host.client(host.key_a).runs_create(CreateRunRequest(workflowId="conformance-noop")).runId
    wait_terminal(host.client(host.key_a), noop)
    good = recorded["runs"][5]
    suite_id = _suite_id()

    def doc(source: str) -> dict[str, Any]:
        return {
            "suiteId": suite_id,
            "version": "1.0.0",
            "modes": ["golden"],
            "targetAgentId": AGENT,
            "tasks": [
                {
                    "taskId": "ok",
                    "input": {"calls": [], "answer": "a"},
                    "expected": {"kind": "golden", "match": {"strategy": "exact", "value": "a"}},
                    "sourceRunId": good,
                },
                {
                    "taskId": "bad",
                    "input": {"calls": [], "answer": "a"},
                    "expected": {"kind": "golden", "match": {"strategy": "exact", "value": "a"}},
                    "sourceRunId": source,
                },
            ],
        }

    unknown = "tenant-a/r-0000000000000000000000000000"
    reference = raw(host.base_url, "POST", SUITES, doc(unknown), key=host.key_a)
    assert (reference.status, reference.json["error"]) == (400, "validation_error")
    assert [e["pointer"] for e in reference.json["details"]["errors"]] == ["/tasks/1/sourceRunId"]
    from_reference = _from_runs(host, host.key_a, suite_id, {"agentId": AGENT, "runIds": [good, unknown]})
    assert from_reference.status == 400
    assert [e["pointer"] for e in from_reference.json["details"]["errors"]] == ["/runIds/1"]
    # Then every unusable source, in a registration or a from-runs request, gets the same bytes as an unknown run
    # named at the same place, without the id
    for reason, value in {
        "tenant B's run": foreign,
        "never invoked the agent": noop,
        "not a run id": "not a run id",
    }.items():
        r = raw(host.base_url, "POST", SUITES, doc(value), key=host.key_a)
        assert (r.status, r.text) == (400, reference.text), reason
        assert value not in r.text
        r = _from_runs(host, host.key_a, suite_id, {"agentId": AGENT, "runIds": [good, value]})
        assert (r.status, r.text) == (400, from_reference.text), reason
    # and no version was written
    assert raw(host.base_url, "GET", f"{SUITES}/{suite_id}", key=host.key_a).status == 404
    assert _ports().host.get_item("SUITE#tenant-a", f"{suite_id}@1.0.0") is None
    # a source must be checked against an agent: no targetAgentId is a 400 too
    no_target = {k: v for k, v in doc(good).items() if k != "targetAgentId"}
    r = raw(host.base_url, "POST", SUITES, no_target, key=host.key_a)
    assert (r.status, r.json["error"]) == (400, "validation_error")


@pytest.mark.parametrize(
    "body",
    [
        {"agentId": AGENT, "runIds": ["x"], "limit": 3},  # runIds and a filter
        {"agentId": AGENT, "seed": "s"},  # seed without sampleRate
        {"agentId": AGENT, "sampleRate": 0},
        {"agentId": AGENT, "sampleRate": 1.5},
        {"agentId": AGENT, "limit": 0},
        {"agentId": AGENT, "status": "running"},
        {"agentId": AGENT, "startedAfter": "yesterday at noon"},
        {"agentId": AGENT, "strategy": "fuzzy"},
        {"agentId": AGENT, "base": "latest"},  # no version to append to
        {"agentId": AGENT, "unknown": 1},
        {"runIds": ["x"]},  # no agent
        {"agentId": AGENT, "workflowId": "no-such-workflow-anywhere"},  # selects nothing
        [],
    ],
)
def test_bad_from_runs_requests_are_400_and_write_nothing(host, body):
    suite_id = _suite_id()
    r = _from_runs(host, host.key_a, suite_id, body)
    assert (r.status, r.json["error"]) == (400, "validation_error"), r.text
    assert raw(host.base_url, "GET", f"{SUITES}/{suite_id}", key=host.key_a).status == 404
    bad_id = _from_runs(host, host.key_a, "Not_A_Suite", {"agentId": AGENT})
    assert (bad_id.status, bad_id.json["error"]) == (400, "validation_error")


def test_a_sample_is_deterministic_for_its_seed(host, recorded):
    # Given two suites sampled from the same runs with the same seed, and one with another seed
    picks = []
    for seed in ("s1", "s1", "s2"):
        suite_id = _suite_id()
        r = _from_runs(
            host,
            host.key_a,
            suite_id,
            {
                "agentId": AGENT,
                "workflowId": recorded["workflowId"],
                "sampleRate": 0.5,
                "seed": seed,
                "limit": 50,
                "metadata": {"batch": "b1"},
            },
        )
        assert r.status == 201, r.text
        doc = raw(host.base_url, "GET", f"{SUITES}/{suite_id}/versions/1.0.0", key=host.key_a).json
        picks.append(sorted(t["sourceRunId"] for t in doc["tasks"]))
    # Then the same seed picks the same runs, and the sample is a proper subset
    assert picks[0] == picks[1]
    assert picks[0] != picks[2]
    assert 5 < len(picks[0]) < 45
    # and a metadata value no run carries selects nothing
    r = _from_runs(
        host,
        host.key_a,
        _suite_id(),
        {"agentId": AGENT, "workflowId": recorded["workflowId"], "metadata": {"batch": "other"}},
    )
    assert r.status == 400


def test_erasing_a_source_tombstones_its_task_in_every_version(host, recorded, server):
    from shared.local.ddb_streams import wait_for_stream_idle

    client = host.client(host.key_a)
    tools, _ = server
    workflow_id = register_scripted_agent("tenant-a", "erased")
    sources = _recorded_runs(client, workflow_id, recorded["tool"], 2)
    suite_id = _suite_id()
    assert _from_runs(host, host.key_a, suite_id, {"agentId": AGENT, "runIds": sources[:1]}).status == 201
    assert _from_runs(host, host.key_a, suite_id, {"runIds": sources[1:], "base": "latest"}).status == 201
    erased_task = task_id_for(sources[0])
    # and an eval of 1.0.0 served from the first source's record (its tool-call records hold the source's answers)
    served = _eval(client, f"{suite_id}@1.0.0")
    assert {c.source for c in _ports().tool_calls.list_calls(served)} == {"fixture"}
    # When the first source run is erased
    assert raw(host.base_url, "DELETE", f"/runs/{project_id(sources[0])}", key=host.key_a).status == 204
    assert wait_for_stream_idle(20)
    # Then the eval served from it is erased with it (decision 0108): 404, and none of its records is left
    assert raw(host.base_url, "GET", f"/runs/{project_id(served)}", key=host.key_a).status == 404
    assert _ports().tool_calls.list_calls(served) == [] and _ports().events.read_events(served) == []
    # Then its task is tombstoned in both versions (its input and answer gone), the other task untouched
    for version in ("1.0.0", "1.1.0"):
        doc = raw(host.base_url, "GET", f"{SUITES}/{suite_id}/versions/{version}", key=host.key_a).json
        assert doc["tasks"][0] == {"taskId": erased_task, "tombstoned": True}
        assert sources[0] not in str(doc) and sources[0].partition("/")[2].lower() not in str(doc).lower()
    # and the next eval reports it unverifiable, the other task passing from its own source, with no live hit
    before = tools.count()
    run = _eval(client, f"{suite_id}@1.1.0")
    assert tools.count() == before
    rows = {t["taskId"]: t for t in _summary(host, run)["tasks"]}
    assert (rows[erased_task]["passed"], rows[erased_task]["fixtureMissCount"]) == (False, 1)
    assert rows[task_id_for(sources[1])]["passed"] is True
    report = raw(host.base_url, "GET", f"{BASE}/runs/{project_id(run)}/eval-report", key=host.key_a).json
    assert {t["taskId"]: t["verdict"] for t in report["tasks"]}[erased_task] == "unverifiable"
    assert report["verdict"] == "unverifiable"


def test_the_cli_acts_as_a_tenant_with_a_base_url_and_host_wide_without(host, recorded, capsys, monkeypatch, tmp_path):
    import json

    from shared.local.commands import main

    monkeypatch.delenv("OPENWOP_BASE_URL", raising=False)
    monkeypatch.delenv("OPENWOP_API_KEY", raising=False)
    suite_id = _suite_id()
    # When tenant A builds a suite from two named runs with the eval CLI
    code = main(
        [
            "eval",
            "suite",
            "from-runs",
            suite_id,
            "--agent",
            AGENT,
            "--run-id",
            recorded["runs"][6],
            "--run-id",
            recorded["runs"][7],
            "--endpoint",
            host.base_url,
            "--api-key",
            host.key_a,
        ]
    )
    assert code == 0
    assert capsys.readouterr().out.strip() == f"{suite_id}@1.0.0 2 tasks (2 added)"
    # Then `suites list|get` with --base-url/--api-key (or the env) read it as tenant A, and not as tenant B
    assert main(["suites", "list", "--base-url", host.base_url, "--api-key", host.key_a]) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert [s["versions"] for s in listed if s["suiteId"] == suite_id] == [["1.0.0"]]
    monkeypatch.setenv("OPENWOP_BASE_URL", host.base_url)
    monkeypatch.setenv("OPENWOP_API_KEY", host.key_a)
    assert main(["suites", "get", suite_id, "--version", "1.0.0"]) == 0
    assert len(json.loads(capsys.readouterr().out)["tasks"]) == 2
    assert main(["suites", "get", suite_id, "--api-key", host.key_b]) == 1
    assert "404 not_found" in capsys.readouterr().err
    # and a tenant's put goes through the same checks as the API (an unusable source: the uniform refusal)
    doc = raw(host.base_url, "GET", f"{SUITES}/{suite_id}/versions/1.0.0", key=host.key_a).json
    f = tmp_path / "suite.json"
    f.write_text(json.dumps({**doc, "version": "2.0.0"}), encoding="utf-8")
    assert main(["suites", "put", str(f), "--api-key", host.key_b]) == 1
    assert "400 validation_error" in capsys.readouterr().err
    assert main(["suites", "put", str(f)]) == 0
    assert json.loads(capsys.readouterr().out)["evalSuiteRef"] == f"{suite_id}@2.0.0"
    # without a base URL or key, `suites list` is the operator's host-wide view, which holds no tenant's suite
    monkeypatch.delenv("OPENWOP_BASE_URL")
    monkeypatch.delenv("OPENWOP_API_KEY")
    assert main(["suites", "list"]) == 0
    assert suite_id not in capsys.readouterr().out
    # a bad duration is a usage error (exit 3), before any request
    assert (
        main(
            [
                "eval",
                "suite",
                "from-runs",
                suite_id,
                "--agent",
                AGENT,
                "--since",
                "yesterday",
                "--endpoint",
                host.base_url,
                "--api-key",
                host.key_a,
            ]
        )
        == 3
    )
    assert "--since" in capsys.readouterr().err


def test_since_and_sample_flags_make_the_filter_body():
    from shared.cli.suitecli import from_runs_body, since_iso

    # Given the CLI flags of a filtered build
    body = from_runs_body("agent-x@2", "24h", 0.1, None, 20, [], True, None, now_s=86_400 * 2)
    # Then they become the request's filter fields, the version a filter on agentVersion
    assert body == {
        "agentId": "agent-x",
        "agentVersion": "2",
        "startedAfter": "1970-01-02T00:00:00Z",
        "sampleRate": 0.1,
        "seed": "openwop",
        "limit": 20,
        "base": "latest",
    }
    assert since_iso("30m", 3600) == "1970-01-01T00:30:00Z"


def test_from_runs_costs_a_bounded_number_of_requests_per_run(host, recorded):
    """The measured cost in docs/decisions/0112 and 0121: requests of one ``:from-runs`` over 50 named runs."""
    import time

    from shared.services import suite_runs
    from shared.services.common import Caller
    from tests.helpers import own_calls

    with own_calls(_ports().runs._c) as measure:
        # When a suite is built from 50 named runs
        began = time.monotonic()
        status, body = measure.run(
            suite_runs.from_runs,
            _ports(),
            Caller("tenant-a", "measure"),
            _suite_id(),
            {"agentId": AGENT, "runIds": recorded["runs"]},
        )
        took = time.monotonic() - began
    # Then the runs are read in batches, not one by one: their items, logs and call records 100 keys to a request,
    # their links 50 to a transaction (a Query of each run's log or calls alone would be 50 requests); the only
    # Queries read the suite's index rows (for the version's number, then for its listing row)
    assert (status, body["taskCount"]) == (201, 50)
    seen = measure.counts()
    total = sum(seen.values())
    print(f"\nfrom-runs over 50 runs: {total} DynamoDB requests {seen} in {took:.2f} s")
    assert total <= 20 and seen["dynamodb:Query"] <= 2 and seen["dynamodb:TransactWriteItems"] == 1
