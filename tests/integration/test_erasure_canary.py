"""The erasure canary (issue 37 item 2): a marked input and a marked tool output go through every path that derives
from a run, then ``DELETE /runs/R``; nothing answers them through the API and no table, object or item holds them,
raw, compressed or base64 (``tests.faults.scan_for``).

Paths: R created and forked with an Idempotency-Key (idempotency records); a suite made ``:from-runs`` R; an eval of
it served R's record; that eval accepted into a new version (R's answers copied into its fixtures); an eval of the
accepted version; two sampling rules' drafts holding R, one published into a version. And a session of an external
agent, whose input holds the marker and whose call through the tool gateway (the official MCP client) answered the
other one, erased the same way. The webhook dead letters and an eval served R's record through ``fixtureRuns`` are
``test_erasure_lineage.py``'s.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from shared.protocol.ids import project_id
from tests.faults import scan_for
from tests.helpers import unique
from tests.integration.test_eval_runs import AGENT, run_eval
from tests.wire import raw, wait_terminal
from tests.workflows import register_scripted_agent

BASE = "/host/openwop-serverless"
SUITES = f"{BASE}/eval-suites"


def _tables() -> list[str]:
    from shared.settings import get_settings

    s = get_settings()
    return [s.runs_table, s.events_table, s.tool_calls_table, s.idempotency_table, s.host_table, s.signing_table]


def _scan(host: Any, needles: list[str]) -> list[tuple[str, str]]:
    from shared.settings import get_settings

    bucket = get_settings().fixtures_bucket
    return scan_for(host.aws.client("dynamodb"), host.aws.client("s3"), _tables(), bucket, needles)


def _post(host: Any, path: str, body: dict[str, Any], *, keyed: bool = False, status: int = 201) -> dict[str, Any]:
    headers = {"Idempotency-Key": uuid.uuid4().hex} if keyed else None
    r = raw(host.base_url, "POST", path, body, key=host.key_a, headers=headers)
    assert r.status == status, r.text
    return r.json


def _get(host: Any, path: str) -> Any:
    return raw(host.base_url, "GET", path, key=host.key_a)


def _settled_draft(host: Any, suite_id: str) -> dict[str, Any]:
    from shared.local.ddb_streams import wait_for_stream_idle
    from tests.helpers import eventually

    assert wait_for_stream_idle(30)
    return eventually(lambda: (d := _get(host, f"{SUITES}/{suite_id}/draft").json).get("tasks") and d, timeout=30)


def _external_session(host: Any, said: str, answered: str) -> str:
    """A session of an external agent given ``said`` as its input, whose echo call through the gateway answered
    ``answered``; its run id."""
    import asyncio

    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    agent_id = "x" + uuid.uuid4().hex[:10]
    manifest = {"agentId": agent_id, "persona": "Canary", "modelClass": "general", "systemPrompt": "Echo."}
    manifest["toolAllowlist"] = ["conformance.eval:echo"]
    body = {"version": "1.0.0", "manifest": manifest, "model": {"provider": "mock", "model": "mock-model"}}
    _post(host, f"{BASE}/agents", {**body, "runtime": {"kind": "external"}})
    session = _post(host, f"{BASE}/agents/{agent_id}/sessions", {"input": {"q": said}})

    async def call() -> Any:
        auth = {"Authorization": f"Bearer {session['token']}"}
        async with (
            httpx2.AsyncClient(headers=auth, timeout=30) as http,
            streamable_http_client(session["mcpUrl"], http_client=http) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            return await client.call_tool("conformance.eval:echo", {"note": answered})

    assert answered in json.dumps((asyncio.run(call())).structured_content)
    return str(session["runId"])


def test_a_canary_through_every_derived_path_is_nowhere_after_the_erasure(host):
    from shared.local.ddb_streams import wait_for_stream_idle

    # Given a sampling rule on the agent's runs, and a run R whose input holds one marker and whose tool answered
    # another (the echo tool answers its arguments), created and forked with Idempotency-Keys
    said, answered = unique("canary-input"), unique("canary-output")
    client = host.client(host.key_a)
    workflow = register_scripted_agent("tenant-a", "canary")
    suite, drafted, kept = (f"tests.local.evals.c{uuid.uuid4().hex[:10]}" for _ in range(3))
    for sampling in (drafted, kept):
        rule = {"agentId": AGENT, "filter": {"workflowId": workflow}, "sampleRate": 1}
        _post(host, f"{SUITES}/{sampling}/rules", rule)
    script = {"calls": [{"tool": "conformance.eval:echo", "args": {"note": answered}}], "answer": said}
    source = _post(host, "/runs", {"workflowId": workflow, "inputs": {"script": script}}, keyed=True)["runId"]
    assert wait_terminal(client, source).status == "completed"
    fork = _post(host, f"/runs/{project_id(source)}:fork", {"mode": "replay", "fromSeq": 0}, keyed=True)["runId"]
    assert wait_terminal(client, fork).status == "completed"
    # and a suite made from R, an eval of it served R's record, that eval accepted, and an eval of the accepted version
    _post(host, f"{SUITES}/{suite}:from-runs", {"agentId": AGENT, "runIds": [source]})
    candidate = run_eval(client, f"{suite}@1.0.0")
    accepted = _post(host, f"{SUITES}/{suite}:accept", {"runId": candidate, "reason": "canary"})
    assert accepted["accepted"][0]["calls"][0]["provenance"] == "recorded"
    served = run_eval(client, f"{suite}@1.1.0")
    # and the rules' drafts holding R, one of them published as a version
    for sampling in (drafted, kept):
        assert [t["sourceRunId"] for t in _settled_draft(host, sampling)["tasks"]] == [source]
    _post(host, f"{SUITES}/{drafted}:publish", {})
    # and a session of an external agent given the input marker, whose gateway call answered the output marker
    session = _external_session(host, said, answered)
    ids = [source, fork, candidate, served, session]
    needles = [*ids, said, answered]
    versions = [f"{SUITES}/{suite}/versions/1.0.0", f"{SUITES}/{suite}/versions/1.1.0"]
    versions.append(f"{SUITES}/{drafted}/versions/1.0.0")
    assert all(answered in _get(host, v).text or said in _get(host, v).text for v in versions)
    before = _scan(host, needles)
    assert {n for _, n in before} == set(needles)  # each marker and id is stored somewhere (the scan is looking)
    held = {where for where, _ in before}
    assert set(_tables()[:5]) <= held, held  # every table but the signing secrets' holds some of it

    # When R and the session are erased
    for run_id in (source, session):
        assert raw(host.base_url, "DELETE", f"/runs/{project_id(run_id)}", key=host.key_a).status == 204
    assert wait_for_stream_idle(30)

    # Then R and every run derived from it answer 404 like an unknown run, their events included
    unknown = _get(host, f"/runs/{project_id('tenant-a/r-' + '0' * 22)}/events/poll")
    for run_id in ids:
        assert _get(host, f"/runs/{project_id(run_id)}").status == 404
        poll = _get(host, f"/runs/{project_id(run_id)}/events/poll")
        assert (poll.status, poll.json) == (unknown.status, unknown.json) and unknown.status == 404
    # and no suite version, draft or listing answers a marker or an id
    drafts = [f"{SUITES}/{drafted}/draft", f"{SUITES}/{kept}/draft"]
    for path in [*versions, *drafts, f"{SUITES}/{suite}", f"{SUITES}/{drafted}", "/runs"]:  # (kept: a draft only)
        r = _get(host, path)
        assert r.status == 200 and [n for n in needles if n in r.text] == [], (path, r.text)
    # and no table, object or item holds one, raw, compressed or base64
    assert _scan(host, needles) == []


def test_an_erased_run_releases_its_scope_claim_only_while_it_holds_it(host):
    from shared.local.ddb_streams import wait_for_stream_idle
    from shared.settings import get_settings

    def create(delay_ms: int) -> Any:
        body = {"workflowId": "conformance-replay-side-effect", "inputs": {"delayMs": delay_ms}, "scopeId": scope}
        return raw(host.base_url, "POST", "/runs", body, key=host.key_a, headers={"OpenWOP-Dedup": "enforce"})

    def host_table_holds(run_id: str) -> bool:
        s = get_settings()
        return bool(
            scan_for(host.aws.client("dynamodb"), host.aws.client("s3"), [s.host_table], s.fixtures_bucket, [run_id])
        )

    # Given a run that held an OpenWOP-Dedup scope and ended (its claim still names it)
    scope, client = unique("canary-scope"), host.client(host.key_a)
    ended = create(10).json["runId"]
    assert wait_terminal(client, ended).status == "completed" and host_table_holds(ended)
    # When it is erased, Then no claim names it any more
    assert raw(host.base_url, "DELETE", f"/runs/{project_id(ended)}", key=host.key_a).status == 204
    assert wait_for_stream_idle(30)
    assert not host_table_holds(ended)
    # Given a run R that held the scope, ended, and a run S that holds it since
    r = create(10).json["runId"]
    assert wait_terminal(client, r).status == "completed"
    s = create(20_000)
    assert s.status == 201, s.text
    # When R is erased
    assert raw(host.base_url, "DELETE", f"/runs/{project_id(r)}", key=host.key_a).status == 204
    assert wait_for_stream_idle(30)
    # Then S still holds the scope: another create for it is refused
    again = create(10)
    assert (again.status, again.json["error"]) == (409, "run_already_active")
    client.runs_cancel(s.json["runId"])
    wait_terminal(client, s.json["runId"])
