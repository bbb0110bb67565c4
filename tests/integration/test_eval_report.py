"""GET /host/openwop-serverless/runs/{runId}/eval-report: per-task diagnostics, tenant-private."""

from __future__ import annotations

import pytest
from openwop_client.types import CreateRunRequest

from shared.protocol.ids import project_id
from tests.evalseed import seed_argument_change, seed_drift, seed_regression
from tests.helpers import unique
from tests.integration.test_eval_runs import _ports, eval_request, put_suite
from tests.wire import raw, wait_terminal

PATH = "/host/openwop-serverless/runs/{}/eval-report"


def report(host, key, run_id, query=""):
    return raw(host.base_url, "GET", PATH.format(project_id(run_id)) + query, key=key)


@pytest.fixture(scope="module")
def seeded(host):
    client = host.client(host.key_a)
    return {**seed_regression(host, client, host.key_a), **seed_drift(client)}


def test_a_regressed_candidate_names_the_regressed_task_with_expected_and_actual(host, seeded):
    r = report(host, host.key_a, seeded["candidate"])
    assert r.status == 200, r.text
    rep = r.json
    assert (rep["runId"], rep["status"], rep["baselineRunId"]) == (seeded["candidate"], "completed", seeded["base"])
    assert rep["verdict"] == rep["pairedVerdict"] == "regressed" and rep["pairedTaskCount"] == 3
    assert rep["scoreDelta"] == pytest.approx(-1 / 3)
    rows = {t["taskId"]: t for t in rep["tasks"]}
    assert [t["taskId"] for t in rep["tasks"]] == ["steady", "served", "answer"]
    assert {k: (v["baselineScore"], v["score"], v["verdict"]) for k, v in rows.items()} == {
        "steady": (1.0, 1.0, "unchanged"),
        "served": (1.0, 1.0, "unchanged"),
        "answer": (1.0, 0.0, "regressed"),
    }
    answer = rows["answer"]
    assert answer["expected"] == {"kind": "golden", "match": {"strategy": "exact", "value": "the answer"}}
    assert [t["actual"] for t in answer["trialResults"]] == ["a changed answer", "a changed answer"]
    assert answer["trials"] == {"total": 2, "done": 2, "passed": 0} and answer["passAllK"] is False
    # provenance: steady's echo went live, served's was answered by the suite's fixture (0 live calls)
    assert rows["steady"]["liveToolCalls"] == 2 and rows["served"]["liveToolCalls"] == 0
    assert [c["provenance"] for t in rows["served"]["trialResults"] for c in t["toolCalls"]] == ["served", "served"]
    assert rows["served"]["servedFrom"] == "suite"
    assert [c["provenance"] for t in rows["steady"]["trialResults"] for c in t["toolCalls"]] == ["live", "live"]
    assert all(t["costUsd"] == 0.0 and isinstance(t["latencyMs"], int) for t in rep["tasks"])


def test_a_fixture_miss_names_the_closest_recorded_call_and_the_differing_pointer(host, seeded):
    rep = report(host, host.key_a, seeded["drift"]).json
    assert rep["verdict"] == "unverifiable" and rep["baselineRunId"] is None
    task = rep["tasks"][0]
    assert (task["taskId"], task["fixtureMissCount"], task["verdict"]) == ("record", 1, "unverifiable")
    assert task["servedFrom"] == seeded["source"] and task["liveToolCalls"] == 0
    assert task["fixtureMisses"] == [
        {
            "trial": 1,
            "callId": task["trialResults"][0]["toolCalls"][0]["callId"],
            "tool": "conformance.eval:counter",
            "recordedFrom": seeded["source"],
            "args": {"op": "inc", "key": "k2"},
            "closest": {"index": 0, "tool": "conformance.eval:counter", "args": {"op": "inc", "key": "k1"}},
            "sameTool": True,
            "differingPointers": ["/key"],
            "wouldMatchWith": {"ignore": ["/key"], "anyOf": {"/key": ["k2"]}},
        }
    ]
    assert [(c["provenance"], c["status"]) for c in task["trialResults"][0]["toolCalls"]] == [
        ("refused", "error"),
        ("served", "ok"),
    ]
    assert task["trialResults"][0]["toolCalls"][0]["errorCode"] == "openwop-serverless.fixture_miss"
    assert task["trialResults"][0]["toolCalls"][1]["servedFrom"] == seeded["source"]


def test_foreign_and_unknown_ids_get_identical_404_bytes(host, seeded):
    foreign = report(host, host.key_b, seeded["candidate"])
    unknown = report(host, host.key_b, "tenant-b/r-0000000000000000000000000000")
    assert foreign.status == unknown.status == 404
    assert foreign.text == unknown.text
    assert foreign.json["error"] == "not_found" and "tenant-a" not in foreign.text
    assert report(host, None, seeded["candidate"]).status == 401
    assert report(host, host.key_a, "not a run id").status in (400, 404)


def test_a_workflow_run_is_a_404_envelope_and_a_running_eval_is_409(host):
    client = host.client(host.key_a)
    noop = client.runs_create(CreateRunRequest(workflowId="conformance-noop")).runId
    wait_terminal(client, noop)
    r = report(host, host.key_a, noop)
    assert (r.status, r.json) == (404, {"error": "not_found", "message": "The run is not an eval run."})
    # a slow eval (many trials) is read while it runs: 409 with the run status, as the summary does
    slow_id = f"tests.local.evals.{unique('slow')}"
    slow = {
        "suiteId": slow_id,
        "version": "1.0.0",
        "modes": ["golden"],
        "trials": 10,
        "tasks": [
            {
                "taskId": f"t{i}",
                "input": {"calls": [], "answer": "x"},
                "expected": {"kind": "golden", "match": {"strategy": "exact", "value": "x"}},
            }
            for i in range(12)
        ],
    }
    assert put_suite(host, host.key_a, slow).status in (200, 201)
    run = client.runs_create(eval_request(f"{slow_id}@1.0.0")).runId
    r = report(host, host.key_a, run)
    client.runs_cancel(run)
    assert r.status == 409, r.text
    assert r.json["error"] == "run_state_conflict" and r.json["details"]["runStatus"] in ("pending", "running")
    prog = r.json["details"]["progress"]
    assert prog["tasks"]["total"] == 12 and prog["trials"]["total"] == 120
    assert 0 <= prog["trials"]["done"] <= 120 and 0 <= prog["tasks"]["done"] <= 12
    # cancelled: terminal, unverifiable
    wait_terminal(client, run)
    done = report(host, host.key_a, run).json
    assert done["status"] == "cancelled" and done["verdict"] == "unverifiable"


def test_the_report_pages_by_task_with_the_same_header_on_every_page(host, seeded):
    whole = report(host, host.key_a, seeded["candidate"]).json
    assert whole["taskCount"] == 3 and "nextCursor" not in whole
    pages, query = [], "?limit=1"
    for _ in range(4):
        page = report(host, host.key_a, seeded["candidate"], query)
        assert page.status == 200, page.text
        pages.append(page.json)
        if "nextCursor" not in page.json:
            break
        query = f"?limit=1&cursor={page.json['nextCursor']}"
    assert [len(p["tasks"]) for p in pages] == [1, 1, 1]
    assert [p.get("nextCursor") for p in pages] == ["tasks-00001", "tasks-00002", None]
    assert [t for p in pages for t in p["tasks"]] == whole["tasks"]
    header = {k: v for k, v in whole.items() if k != "tasks"}
    assert all({k: v for k, v in p.items() if k not in ("tasks", "nextCursor")} == header for p in pages)
    assert header["verdict"] == "regressed"  # the verdict is the whole run's on every page
    two = report(host, host.key_a, seeded["candidate"], "?limit=2&cursor=tasks-00001").json
    assert [t["taskId"] for t in two["tasks"]] == ["served", "answer"] and "nextCursor" not in two


@pytest.mark.parametrize(
    "query", ["?cursor=tasks-00003", "?cursor=tasks-1", "?cursor=nonsense-cursor", "?limit=0", "?limit=two"]
)
def test_a_bad_cursor_or_limit_is_a_400_envelope(host, seeded, query):
    r = report(host, host.key_a, seeded["candidate"], query)
    assert r.status == 400, r.text
    assert r.json["error"] == "validation_error" and seeded["candidate"] not in r.text


def test_a_page_stops_at_its_byte_budget_after_its_first_task(host, seeded):
    from shared.services import eval_report

    ports = _ports()
    rec = ports.runs.get_run(seeded["candidate"])
    one = eval_report.build(ports, rec, 0, 1000, page_bytes=1)
    assert [t["taskId"] for t in one["tasks"]] == ["steady"] and one["nextCursor"] == "tasks-00001"
    rest = eval_report.build(ports, rec, 1, 1000, page_bytes=10**9)
    assert [t["taskId"] for t in rest["tasks"]] == ["served", "answer"] and "nextCursor" not in rest


@pytest.fixture(scope="module")
def changed(host):
    return seed_argument_change(host, host.client(host.key_a), host.key_a)


def test_a_changed_tool_argument_is_the_divergence_with_its_pointer(host, changed):
    # Given a v2 that sends one tool argument (/opts/limit) differently than its baseline
    # When the candidate's report is read
    rep = report(host, host.key_a, changed["candidate"]).json
    rows = {t["taskId"]: t for t in rep["tasks"]}
    # Then the regressed task names the first differing step: the tool call's arguments, at their pointer
    assert rows["lookup"]["verdict"] == "regressed"
    assert rows["lookup"]["divergence"] == {
        "trial": 1,
        "step": 0,
        "kind": "tool-arguments",
        "pointers": ["/opts/limit"],
        "baseline": {
            "type": "tool-call",
            "tool": "conformance.eval:echo",
            "args": {"text": "find", "opts": {"limit": 1}},
        },
        "candidate": {
            "type": "tool-call",
            "tool": "conformance.eval:echo",
            "args": {"text": "find", "opts": {"limit": 2}},
        },
    }
    # and each trial carries its trajectory: the call, its answer, the final output
    assert [s["type"] for s in rows["lookup"]["trialResults"][0]["trajectory"]] == [
        "tool-call",
        "tool-answer",
        "final-output",
    ]
    assert rows["lookup"]["trialResults"][0]["trajectory"][2] == {"type": "final-output", "output": "found"}
    # and the unchanged task has none
    assert rows["same"]["verdict"] == "unchanged" and rows["same"]["divergence"] is None


def test_a_changed_final_output_is_a_final_output_divergence(host, seeded):
    # Given the candidate whose task "answer" decides another answer (no tool calls)
    rows = {t["taskId"]: t for t in report(host, host.key_a, seeded["candidate"]).json["tasks"]}
    # Then its divergence is the final output at step 0, the whole value differing
    div = rows["answer"]["divergence"]
    assert (div["trial"], div["step"], div["kind"], div["pointers"]) == (1, 0, "final-output", [""])
    assert (div["baseline"]["output"], div["candidate"]["output"]) == ("the answer", "a changed answer")
    assert rows["steady"]["divergence"] is None and rows["served"]["divergence"] is None


def test_a_run_without_a_baseline_has_no_divergence(host, seeded):
    # Given the baseline itself (no baselineRunId)
    rep = report(host, host.key_a, seeded["base"]).json
    # Then no task has a divergence, and every trial still has its trajectory
    assert [t["divergence"] for t in rep["tasks"]] == [None, None, None]
    assert all(tr["trajectory"] for t in rep["tasks"] for tr in t["trialResults"])


def test_the_baseline_is_read_once_per_page_in_one_range_of_its_trials(host, changed):
    # Given the candidate's report built on moto with a counting view of the run store
    from shared.services import eval_report

    ports = _ports()
    rec = ports.runs.get_run(changed["candidate"])
    seen: list[tuple[str, str]] = []
    real = ports.runs.query_aux

    def counted(run_id, prefix, **kw):
        seen.append((run_id, prefix))
        return real(run_id, prefix, **kw)

    ports.runs.query_aux = counted  # type: ignore[method-assign]
    try:
        # When one page of both tasks is built
        page = eval_report.build(ports, rec, 0, 1000)
    finally:
        del ports.runs.query_aux
    # Then the baseline's trials were one Query (no model log: the agent is scripted)
    assert seen.count((changed["base"], "TRIAL#")) == 1
    assert [r for r in seen if r[1] == "MCALL#"] == []
    assert page["tasks"][1]["divergence"]["pointers"] == ["/opts/limit"]


def test_pages_read_the_plan_once_and_find_the_baseline_without_its_plan(host, changed):
    # Given a cold container (no plan cached) and a counting view of the run store's item reads
    from shared.engine import evalrun
    from shared.services import eval_report

    ports = _ports()
    rec = ports.runs.get_run(changed["candidate"])
    for run_id in (changed["candidate"], changed["base"]):
        evalrun._plan_cache.pop(run_id, None)
    seen: list[tuple[str, str]] = []
    real = ports.runs.get_aux

    def counted(run_id, sk):
        seen.append((run_id, sk))
        return real(run_id, sk)

    ports.runs.get_aux = counted  # type: ignore[method-assign]
    try:
        # When the report is built in two pages of one task
        one = eval_report.build(ports, rec, 0, 1)
        two = eval_report.build(ports, rec, 1, 1)
    finally:
        del ports.runs.get_aux
    # Then the candidate's plan was read once for both, the baseline's never (its order is in the candidate's plan)
    assert seen == [(changed["candidate"], "EVALPLAN")]
    # and each page still pairs its task with the baseline's trial of the same task
    assert [t["taskId"] for t in one["tasks"] + two["tasks"]] == ["same", "lookup"]
    assert one["tasks"][0]["divergence"] is None
    assert two["tasks"][0]["divergence"]["pointers"] == ["/opts/limit"]


def test_a_candidate_whose_suite_reorders_the_tasks_pairs_each_with_its_own_baseline_trial(host, changed):
    from tests.evalseed import argument_suite
    from tests.integration.test_eval_runs import run_eval

    # Given a candidate version listing the baseline's two tasks in the other order (lookup first, limit 2)
    suite = argument_suite(changed["suite"], "3.0.0", 2)
    suite["tasks"].reverse()
    assert put_suite(host, host.key_a, suite).status in (200, 201)
    cand = run_eval(
        host.client(host.key_a),
        f"{changed['suite']}@3.0.0",
        evalModes=["golden", "regression"],
        baselineRunId=changed["base"],
    )
    # When its report is read one task a page
    first = report(host, host.key_a, cand, "?limit=1").json
    second = report(host, host.key_a, cand, f"?limit=1&cursor={first['nextCursor']}").json
    # Then lookup (index 0 here, 1 in the baseline) diverges at /opts/limit and same (1 here, 0 there) does not
    assert [t["taskId"] for t in first["tasks"] + second["tasks"]] == ["lookup", "same"]
    assert first["tasks"][0]["divergence"]["pointers"] == ["/opts/limit"]
    assert first["tasks"][0]["divergence"]["baseline"]["args"]["opts"] == {"limit": 1}
    assert second["tasks"][0]["divergence"] is None
    assert second["tasks"][0]["trialResults"][0]["trajectory"][-1] == {"type": "final-output", "output": "same"}


def test_a_large_summary_is_read_once_by_a_container_and_only_for_a_terminal_run(host, changed):
    import dataclasses

    from shared.services import summaries

    # Given a terminal eval run whose summary is an S3 object (as a suite of thousands of tasks has), on moto
    ports = _ports()
    rec = ports.runs.get_run(changed["candidate"])
    key = f"tests/{unique('summary')}.json"
    ports.blobs.put_json(key, {"aggregateScore": 0.5, "tasks": []})
    large = dataclasses.replace(rec, summary={"$ref": key})
    # When it is read with the cache and its object then goes
    assert summaries.stored(ports, large, cached=True) == {"aggregateScore": 0.5, "tasks": []}
    ports.blobs.delete_prefix(key)
    # Then a cached read still answers it (read once), an uncached read finds it gone
    assert summaries.stored(ports, large, cached=True) == {"aggregateScore": 0.5, "tasks": []}
    assert summaries.stored(ports, large) is None
    # and a run not terminal is never served from the cache
    running = dataclasses.replace(large, status="running")
    assert summaries.stored(ports, running, cached=True) is None
