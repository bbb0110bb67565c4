"""Accept without invention (issue 36 part 3, docs/decisions/0146-accept-without-invention.md): a call the record
lacks is answered by a live read, by the reviewer, or its task is dropped; otherwise the accept is refused naming it
and nothing is written. The version says who accepted what and why, and erasing a task's source reaches it. A real
loopback tool server counts every live hit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shared.protocol.ids import project_id
from tests.integration.test_accept_change import ADA, BASE, _cli, _register, _suite_id, _task, _tool
from tests.integration.test_eval_runs import AGENT, run_eval
from tests.wire import raw

ALAN = {"customerId": "c-2", "name": "Alan Turing", "tier": "silver"}  # what the loopback lookup answers for c-2
REFUND_290 = {"title": "refund", "amount": 290}
RECORDED_283 = {"tool": "", "args": {"title": "refund", "amount": 283}, "response": {"ticketId": "T-9", "amount": 283}}


@pytest.fixture(scope="module")
def tools(host, server):
    counter, url = server
    return {
        "server": counter,
        "lookup": _tool(host, url, "/crm/lookup", "read"),
        "refund": _tool(host, url, "/tickets", "write"),
    }


def _drifted(host: Any, tools: dict[str, Any]) -> tuple[str, str]:
    """A suite whose ``refund`` task recorded a refund of 283 and whose agent now refunds 290 (a write tool's new
    call), and whose ``lookup`` task recorded c-1 where the agent now looks c-2 up (a read tool's new call); an
    eval of it. (suiteId, the eval's run id)."""
    suite_id = _suite_id()
    recorded = {**RECORDED_283, "tool": tools["refund"]}
    ada = {"tool": tools["lookup"], "args": {"customerId": "c-1"}, "response": ADA}
    ref = _register(
        host,
        suite_id,
        "1.0.0",
        [
            _task("refund", [(tools["refund"], REFUND_290)], [recorded], answer="refunded"),
            _task("lookup", [(tools["lookup"], {"customerId": "c-2"})], [ada], answer="found"),
        ],
    )
    return suite_id, run_eval(host.client(host.key_a), ref)


def _versions(host: Any, suite_id: str) -> list[str]:
    return list(raw(host.base_url, "GET", f"{BASE}/eval-suites/{suite_id}", key=host.key_a).json["versions"])


def _version(host: Any, suite_id: str, version: str) -> dict[str, Any]:
    r = raw(host.base_url, "GET", f"{BASE}/eval-suites/{suite_id}/versions/{version}", key=host.key_a)
    assert r.status == 200, r.text
    return r.json


def test_a_drifted_write_call_is_refused_naming_it_and_nothing_is_written(host, tools, capsys):
    suite_id, candidate = _drifted(host, tools)
    counts = (tools["server"].count("/tickets"), tools["server"].count("/crm/lookup"))
    path = f"{BASE}/eval-suites/{suite_id}:accept"
    # When the run is accepted with no answer for the refund of 290
    r = raw(host.base_url, "POST", path, {"runId": candidate, "reason": "new refund policy"}, key=host.key_a)
    # Then it is refused naming that call: its task, position, tool and where its args left the recorded call
    assert (r.status, r.json["error"]) == (400, "validation_error"), r.text
    assert [(e["pointer"], e["keyword"]) for e in r.json["details"]["errors"]] == [("/answers", "required")]
    assert r.json["details"]["unansweredCalls"] == [
        {"taskId": "refund", "call": 0, "tool": tools["refund"], "differingPointers": ["/amount"]}
    ]
    # and the old answer is nowhere in the refusal, no version is written, and no tool was called (not even the read)
    assert "283" not in r.text and "T-9" not in r.text
    assert _versions(host, suite_id) == ["1.0.0"]
    assert (tools["server"].count("/tickets"), tools["server"].count("/crm/lookup")) == counts
    # When the CLI accepts it, Then exit 3, one line per unanswered call saying how to answer it, nothing written
    assert _cli(host, "accept", candidate, "--reason", "new refund policy") == 3
    err = capsys.readouterr().err
    assert (
        f"unanswered: task refund call 0 {tools['refund']} (args differ at /amount from the closest recorded call); "
        "give --answer refund:0=FILE or --drop refund"
    ) in err
    assert err.strip().splitlines()[-1].startswith("error: the host answered 400 validation_error")
    assert _versions(host, suite_id) == ["1.0.0"]
    assert (tools["server"].count("/tickets"), tools["server"].count("/crm/lookup")) == counts


def test_a_reviewers_answer_is_written_exactly_and_a_read_is_called_live_once(host, tools, capsys, tmp_path: Path):
    suite_id, candidate = _drifted(host, tools)
    tickets, lookups = tools["server"].count("/tickets"), tools["server"].count("/crm/lookup")
    answer = {"ticketId": "T-290", "amount": 290, "note": "reviewed"}
    file = tmp_path / "refund.json"
    file.write_text(json.dumps(answer))
    # When the CLI accepts the run with the reviewer's answer for the refund
    why = "refunds now include the shipping fee"
    assert _cli(host, "accept", candidate, "--reason", why, "--answer", f"refund:0={file}") == 0
    out = capsys.readouterr()
    # Then it prints the new version, and one line per accepted call with where its answer came from
    assert out.out.strip() == f"{suite_id}@1.1.0"
    assert f"accepted: task refund call 0 {tools['refund']}: reviewer-supplied" in out.err
    assert f"accepted: task lookup call 0 {tools['lookup']}: accepted-live" in out.err
    doc = _version(host, suite_id, "1.1.0")
    tasks = {t["taskId"]: t for t in doc["tasks"]}
    # and the refund's fixture is exactly the reviewer's answer under the new arguments; the write tool never ran
    assert tasks["refund"]["fixtures"]["toolResponses"] == [
        {"tool": tools["refund"], "args": REFUND_290, "argsMatch": "exact", "response": answer}
    ]
    assert tools["server"].count("/tickets") == tickets
    # and the lookup of c-2 was called live exactly once, keyed, and recorded as the tool answered (not Ada's answer)
    assert tools["server"].count("/crm/lookup") == lookups + 1
    hit = [h for h in tools["server"].hits if h.path == "/crm/lookup"][-1]
    assert hit.body == {"customerId": "c-2"} and hit.headers["idempotency-key"].startswith("owop-")
    assert tasks["lookup"]["fixtures"]["toolResponses"] == [
        {"tool": tools["lookup"], "args": {"customerId": "c-2"}, "argsMatch": "exact", "response": ALAN}
    ]
    # and the version records who accepted what and why
    acceptance = doc["acceptance"]
    assert acceptance["reason"] == why
    assert set(acceptance["by"]) == {"keyId", "subjectId"} and acceptance["by"]["subjectId"]
    assert acceptance["tasks"] == [
        {"taskId": "refund", "provenance": ["reviewer-supplied"]},
        {"taskId": "lookup", "provenance": ["accepted-live"]},
    ]
    assert "283" not in json.dumps(doc)
    # and the same candidate now passes it with no miss and no live hit
    assert _cli(host, "run", "--suite", f"{suite_id}@1.1.0", "--agent", AGENT, "--wait", "--json") == 0
    rows = json.loads(capsys.readouterr().out)["tasks"]
    assert [(t["taskId"], t["fixtureMissCount"]) for t in rows] == [("refund", 0), ("lookup", 0)]
    assert (tools["server"].count("/tickets"), tools["server"].count("/crm/lookup")) == (tickets, lookups + 1)


def test_an_answer_through_the_api_and_a_dropped_task(host, tools, capsys):
    suite_id, candidate = _drifted(host, tools)
    path = f"{BASE}/eval-suites/{suite_id}:accept"
    error = {"code": "external_call_failed", "message": "refunds are closed"}
    # An answer for a call the record has, or past the trial's calls, is refused and writes nothing
    for bad in ({"taskId": "refund", "call": 1, "response": 1}, {"taskId": "nope", "call": 0, "response": 1}):
        r = raw(host.base_url, "POST", path, {"runId": candidate, "reason": "r", "answers": [bad]}, key=host.key_a)
        assert (r.status, r.json["error"]) == (400, "validation_error"), r.text
    assert _versions(host, suite_id) == ["1.0.0"]
    # When the API accepts the refund with an error answer
    body = {
        "runId": candidate,
        "reason": "refunds are closed",
        "taskIds": ["refund"],
        "answers": [{"taskId": "refund", "call": 0, "response": error, "isError": True}],
    }
    r = raw(host.base_url, "POST", path, body, key=host.key_a)
    assert r.status == 201, r.text
    assert r.json["accepted"] == [
        {"taskId": "refund", "calls": [{"call": 0, "tool": tools["refund"], "provenance": "reviewer-supplied"}]}
    ]
    assert _version(host, suite_id, "1.1.0")["tasks"][0]["fixtures"]["toolResponses"] == [
        {"tool": tools["refund"], "args": REFUND_290, "argsMatch": "exact", "response": error, "isError": True}
    ]
    # When the CLI drops the refund and accepts the rest
    lookups = tools["server"].count("/crm/lookup")
    assert _cli(host, "accept", candidate, "--reason", "refund drifts; keep the lookup", "--drop", "refund") == 0
    out = capsys.readouterr()
    assert out.out.strip() == f"{suite_id}@1.2.0"
    assert "dropped: task refund" in out.err
    # Then the new version has no refund task, and says it was dropped
    doc = _version(host, suite_id, "1.2.0")
    assert [t["taskId"] for t in doc["tasks"]] == ["lookup"]
    assert doc["acceptance"]["droppedTaskIds"] == ["refund"]
    assert doc["acceptance"]["tasks"] == [{"taskId": "lookup", "provenance": ["accepted-live"]}]
    assert tools["server"].count("/crm/lookup") == lookups + 1


def test_reason_is_required_and_acceptance_is_written_only_by_accept(host, tools, capsys):
    suite_id, candidate = _drifted(host, tools)
    lookups = tools["server"].count("/crm/lookup")
    # When the CLI is not told why, Then it is a usage error (exit 3) and nothing is sent
    assert _cli(host, "accept", candidate, "--drop", "refund") == 3
    assert "--reason" in capsys.readouterr().err
    r = raw(host.base_url, "POST", f"{BASE}/eval-suites/{suite_id}:accept", {"runId": candidate}, key=host.key_a)
    assert (r.status, r.json["details"]["errors"][0]["pointer"]) == (400, "/reason")
    assert _versions(host, suite_id) == ["1.0.0"]
    assert tools["server"].count("/crm/lookup") == lookups
    # and a registration cannot forge an acceptance record
    doc = {**_version(host, suite_id, "1.0.0"), "version": "2.0.0"}
    doc["acceptance"] = {
        "by": {"keyId": None, "subjectId": "x"},
        "at": "2026-01-01T00:00:00Z",
        "reason": "x",
        "tasks": [],
    }
    r = raw(host.base_url, "POST", f"{BASE}/eval-suites", doc, key=host.key_a)
    assert (r.status, r.json["details"]["errors"][0]["pointer"]) == (400, "/acceptance")


def test_erasing_the_source_run_reaches_the_accepted_version(host, server):
    from shared.local.ddb_streams import wait_for_stream_idle
    from tests.integration.test_suites_tenant import _from_runs, _recorded_runs
    from tests.workflows import register_lookup_tool, register_scripted_agent

    client = host.client(host.key_a)
    tool_id = register_lookup_tool(host, server[1])
    source = _recorded_runs(client, register_scripted_agent("tenant-a", "accepted"), tool_id, 1)[0]
    suite_id = _suite_id()
    # Given a suite built from production run R, an eval of it, and that eval accepted into 1.1.0
    assert _from_runs(host, host.key_a, suite_id, {"agentId": AGENT, "runIds": [source]}).status == 201
    candidate = run_eval(client, f"{suite_id}@1.0.0")
    body = {"runId": candidate, "reason": "the recorded behaviour is right"}
    r = raw(host.base_url, "POST", f"{BASE}/eval-suites/{suite_id}:accept", body, key=host.key_a)
    assert r.status == 201, r.text
    assert r.json["accepted"][0]["calls"] == [{"call": 0, "tool": tool_id, "provenance": "recorded"}]
    accepted = _version(host, suite_id, "1.1.0")["tasks"][0]
    # Then the accepted task holds R's recorded call and answer (an unknown customer: an error) and stays linked to R
    assert "sourceRunId" not in accepted and accepted["derivedFromRunIds"] == [source]
    assert [(e["args"], e.get("isError")) for e in accepted["fixtures"]["toolResponses"]] == [
        ({"customerId": "c-0"}, True)
    ]
    # and an eval of the accepted version (served R's answers from it) is linked to R as well
    served = run_eval(client, f"{suite_id}@1.1.0")
    # When R is erased
    assert raw(host.base_url, "DELETE", f"/runs/{project_id(source)}", key=host.key_a).status == 204
    assert wait_for_stream_idle(20)
    # Then that eval is erased with it (decision 0108), as the candidate served from R is
    for run_id in (served, candidate):
        assert raw(host.base_url, "GET", f"/runs/{project_id(run_id)}", key=host.key_a).status == 404
    # Then the accepted version's copy is tombstoned too: none of R's input, answers or id is left in it
    for version in ("1.0.0", "1.1.0"):
        doc = _version(host, suite_id, version)
        assert doc["tasks"][0] == {"taskId": accepted["taskId"], "tombstoned": True}
        assert "c-0" not in json.dumps(doc["tasks"]) and source.partition("/")[2].lower() not in json.dumps(doc).lower()
