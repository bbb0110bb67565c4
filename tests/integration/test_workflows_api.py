"""Workflows a tenant registers, over HTTP: statuses, schema refusals, versions, tenant isolation, deletion, runs
that use every PortValue kind, and the size bounds."""

from __future__ import annotations

import json

import pytest
from openwop_client import WopError
from openwop_client.types import CreateRunRequest

from tests.helpers import unique
from tests.wire import all_events, raw, types_of, wait_terminal
from tests.workflows import chain, connection, definition, edge, node, static, variable

REG = "/host/openwop-serverless/workflows"


def _post(host, doc, key=None):
    return raw(host.base_url, "POST", REG, doc, key=key or host.key_a)


def _noop(wid: str, version: str = "1.0") -> dict:
    return definition(wid, [node("a", "core.noop")], version=version)


# ---------------------------------------------------------------------------- registration statuses


def test_register_then_identical_repost_then_conflict_then_new_version(host):
    wid = unique("reg")
    # When a new definition is posted
    first = _post(host, _noop(wid))
    assert first.status == 201 and first.json == {"workflowId": wid, "version": "1.0", "name": wid}
    # Then the identical document again is 200 with the same body
    again = _post(host, _noop(wid))
    assert again.status == 200 and again.json == first.json
    # And another document under the same id and version is 409
    changed = _noop(wid)
    changed["description"] = "different"
    conflict = _post(host, changed)
    assert conflict.status == 409 and conflict.json["error"] == "version_conflict"
    # But a different version is a new version, and the one GET /workflows serves
    changed["version"] = "2.0"
    second = _post(host, changed)
    assert second.status == 201 and second.json["version"] == "2.0"
    assert host.client(host.key_a).workflows_get(wid)["version"] == "2.0"
    # And re-posting the older version leaves the latest current
    assert _post(host, _noop(wid)).status == 200
    assert host.client(host.key_a).workflows_get(wid)["description"] == "different"


def test_a_run_uses_the_latest_version_and_pins_it(host):
    from shared.wiring import get_ports

    wid = unique("pin")
    client = host.client(host.key_a)
    assert _post(host, _noop(wid, "1.0")).status == 201
    old = client.runs_create(CreateRunRequest(workflowId=wid)).runId
    two = definition(wid, [node("a", "core.noop"), node("b", "core.noop")], [edge("a", "b")], version="2.0")
    assert _post(host, two).status == 201
    new = client.runs_create(CreateRunRequest(workflowId=wid)).runId
    wait_terminal(client, old)
    wait_terminal(client, new)
    assert types_of(all_events(client, old))[1:-1] == [("node.started", "a"), ("node.completed", "a")]
    assert ("node.completed", "b") in types_of(all_events(client, new))
    ports = get_ports()
    assert ports.runs.get_run(old).data["workflowVersion"] == "1.0"
    assert ports.runs.get_run(new).data["workflowVersion"] == "2.0"


def test_a_fixture_id_cannot_be_registered_over_or_deleted(host):
    doc = _noop("conformance-noop")
    r = _post(host, doc)
    assert r.status == 409 and r.json["error"] == "version_conflict"
    d = raw(host.base_url, "DELETE", f"{REG}/conformance-noop", key=host.key_a)
    assert d.status == 409 and d.json["error"] == "version_conflict"
    assert host.client(host.key_a).workflows_get("conformance-noop")["name"] == "Conformance: Noop"


# ---------------------------------------------------------------------------- schema refusals


def _errors(r) -> list[dict]:
    """Where and which rule (JSON Pointers, RFC 6901: "" is the whole body), each with a message."""
    assert r.status == 400 and r.json["error"] == "validation_error", r.text
    errors = r.json["details"]["errors"]
    assert all(e["message"] for e in errors), errors
    return [{"pointer": e["pointer"], "keyword": e["keyword"]} for e in errors]


def test_an_unknown_key_is_refused_without_echoing_it(host):
    doc = _noop(unique("closed"))
    doc["nodes"][0]["secretLookingKey"] = "v"
    r = _post(host, doc)
    assert _errors(r) == [{"pointer": "/nodes/0", "keyword": "additionalProperties"}]
    assert "secretLookingKey" not in r.text


def test_an_unknown_type_id_is_refused(host):
    doc = definition(unique("typ"), [node("a", "core.nope")])
    assert _errors(_post(host, doc)) == [{"pointer": "", "keyword": "graph"}]
    assert "unknown typeId" in _post(host, doc).json["message"]


def test_a_cycle_without_a_loop_bound_is_refused_and_with_one_accepted(host):
    doc = definition(
        unique("cyc"),
        [node("s", "core.noop"), node("a", "core.noop"), node("b", "core.noop")],
        [edge("s", "a"), edge("a", "b"), edge("b", "a")],
    )
    r = _post(host, doc)
    assert _errors(r) == [{"pointer": "", "keyword": "graph"}] and "maxLoopbackIterations" in r.json["message"]
    doc["settings"] = {"maxLoopbackIterations": 2}
    assert _post(host, doc).status == 201


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda d: d["nodes"][0]["inputs"].update(x={"type": "literal", "value": 1}),
            [{"pointer": "/nodes/0/inputs/x", "keyword": "oneOf"}],
        ),
        (
            lambda d: d["nodes"][0]["inputs"].update(x={"type": "expression", "expression": "1 + 1"}),
            [{"pointer": "/nodes/0/inputs/x", "keyword": "expression"}],
        ),
        (
            lambda d: d["nodes"][0]["inputs"].update(x={"type": "connection", "nodeId": "a", "outputKey": "k"}),
            [{"pointer": "/nodes/0/inputs/x", "keyword": "not-upstream"}],
        ),
        (
            lambda d: d["nodes"][0].update(agent={"agentId": "x"}),
            [{"pointer": "/nodes/0/agent", "keyword": "unsupported"}],
        ),
        (
            lambda d: d.update(channels={"c": {"reducer": "replace"}}),
            [{"pointer": "/channels", "keyword": "unsupported"}],
        ),
        (lambda d: d.pop("triggers"), [{"pointer": "", "keyword": "required"}]),
        (lambda d: d.update(version="v" * 129), [{"pointer": "/version", "keyword": "maxLength"}]),
        (
            lambda d: d.update(configurableSchema={"type": "nope"}),
            [{"pointer": "/configurableSchema/type", "keyword": "anyOf"}],
        ),
        (
            lambda d: d.update(configurableSchema={"$ref": "https://example.com/s.json"}),
            [{"pointer": "/configurableSchema", "keyword": "$ref"}],
        ),
    ],
)
def test_what_this_host_cannot_run_is_refused(host, mutate, expected):
    doc = _noop(unique("refuse"))
    mutate(doc)
    assert _errors(_post(host, doc)) == expected


def test_compensation_policy_needs_a_capability(host):
    doc = _noop(unique("comp"))
    doc["settings"] = {"compensation": {"mode": "x"}}
    r = _post(host, doc)
    assert r.status == 422 and r.json["error"] == "capability_required"
    assert r.json["details"] == {"requiredCapability": "compensation"}


def test_a_body_that_is_not_an_object_is_refused(host):
    assert _errors(_post(host, [1, 2])) == [{"pointer": "", "keyword": "type"}]


# ---------------------------------------------------------------------------- tenant isolation and deletion


def test_another_tenant_cannot_get_list_or_delete_it(host):
    wid = unique("mine")
    assert _post(host, _noop(wid)).status == 201
    unknown = unique("nobody")
    # GET /workflows/{id}: tenant B sees the same bytes for A's id as for an id nobody registered
    b_get = raw(host.base_url, "GET", f"/workflows/{wid}", key=host.key_b)
    b_unknown = raw(host.base_url, "GET", f"/workflows/{unknown}", key=host.key_b)
    assert b_get.status == 404 and b_get.text == b_unknown.text and wid not in b_get.text
    # DELETE: the same, and A's workflow survives
    b_del = raw(host.base_url, "DELETE", f"{REG}/{wid}", key=host.key_b)
    b_del_unknown = raw(host.base_url, "DELETE", f"{REG}/{unknown}", key=host.key_b)
    assert b_del.status == 404 and b_del.text == b_del_unknown.text and b_del.text == b_get.text
    assert raw(host.base_url, "GET", f"/workflows/{wid}", key=host.key_a).status == 200
    # The list: B's never shows A's, A's shows it
    listed_b = raw(host.base_url, "GET", f"{REG}?limit=100", key=host.key_b)
    assert listed_b.status == 200 and wid not in listed_b.text
    assert wid in _all_ids(host, host.key_a)
    # And B cannot run it
    with pytest.raises(WopError) as err:
        host.client(host.key_b).runs_create(CreateRunRequest(workflowId=wid))
    assert err.value.status == 404


def _all_ids(host, key) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        page = raw(host.base_url, "GET", f"{REG}?limit=2" + (f"&cursor={cursor}" if cursor else ""), key=key)
        assert page.status == 200
        ids += [w["workflowId"] for w in page.json["workflows"]]
        cursor = page.json.get("nextCursor")
        if cursor is None:
            return ids


def test_the_list_pages_in_id_order_and_refuses_bad_parameters(host):
    prefix = unique("lst")
    for i in (3, 1, 2):
        assert _post(host, _noop(f"{prefix}-{i}"), key=host.key_b).status == 201
    ids = [i for i in _all_ids(host, host.key_b) if i.startswith(prefix)]
    assert ids == [f"{prefix}-1", f"{prefix}-2", f"{prefix}-3"]
    page = raw(host.base_url, "GET", f"{REG}?limit=1", key=host.key_b).json
    assert set(page["workflows"][0]) == {"workflowId", "name", "version", "registeredAt"}
    for q in ("limit=0", "limit=x", "cursor=Not~A~Workflow"):
        assert raw(host.base_url, "GET", f"{REG}?{q}", key=host.key_b).status == 400, q


def test_delete_removes_every_version_and_runs_keep_their_definition(host):
    wid = unique("gone")
    client = host.client(host.key_a)
    doc = definition(wid, [node("w", "core.conformance.hold", inputs={"delayMs": static(1500)})])
    assert _post(host, doc).status == 201
    assert _post(host, {**doc, "version": "2.0"}).status == 201
    run = client.runs_create(CreateRunRequest(workflowId=wid)).runId
    # When the workflow is deleted while its run is in flight
    d = raw(host.base_url, "DELETE", f"{REG}/{wid}", key=host.key_a)
    assert d.status == 204 and d.text == ""
    # Then it is gone everywhere
    assert raw(host.base_url, "GET", f"/workflows/{wid}", key=host.key_a).status == 404
    assert raw(host.base_url, "DELETE", f"{REG}/{wid}", key=host.key_a).status == 404
    assert wid not in _all_ids(host, host.key_a)
    with pytest.raises(WopError) as err:
        client.runs_create(CreateRunRequest(workflowId=wid))
    assert err.value.status == 404
    # And the run created before completes on the definition it pinned
    assert wait_terminal(client, run).status == "completed"
    # And the id can be registered again from scratch (versions were removed: no conflict with the old 1.0)
    changed = {**doc, "description": "new"}
    assert _post(host, changed).status == 201


# ---------------------------------------------------------------------------- runs of registered workflows


def test_a_run_resolves_static_variable_and_connection_inputs(host):
    wid = unique("ports")
    doc = definition(
        wid,
        [
            node(
                "first",
                "core.conformance.hold",
                inputs={
                    "delayMs": static(0),
                    "greeting": variable("greeting"),
                    "nothing": variable("unset", optional=True),
                },
            ),
            node(
                "tool",
                "core.tool",
                config={"tool": "conformance.eval:echo"},
                inputs={
                    "said": connection("first", "greeting"),
                    "fixed": static({"n": [1, 2]}),
                    "maybe": connection("first", "absent", optional=True),
                },
            ),
        ],
        [edge("first", "tool")],
        variables=[{"name": "greeting", "type": "string", "defaultValue": "hi"}],
    )
    assert _post(host, doc).status == 201
    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId=wid, inputs={"greeting": "hello"})).runId
    assert wait_terminal(client, run).status == "completed"
    done = {e.nodeId: e.payload["outputs"] for e in all_events(client, run) if e.type == "node.completed"}
    # hold outputs equal its resolved inputs; the echo tool returns the args it was called with
    assert done["first"] == {"delayMs": 0, "greeting": "hello"}
    assert done["tool"] == {"result": {"said": "hello", "fixed": {"n": [1, 2]}}}


def test_a_required_input_without_a_value_fails_its_node(host):
    wid = unique("unset")
    doc = definition(
        wid, [node("t", "core.tool", config={"tool": "conformance.eval:echo"}, inputs={"x": variable("never")})]
    )
    assert _post(host, doc).status == 201
    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId=wid)).runId
    snap = wait_terminal(client, run)
    assert snap.status == "failed" and snap.error.code == "node_execution_failed"
    failed = next(e for e in all_events(client, run) if e.type == "node.failed")
    assert "variable" in failed.payload["error"]["message"]


def test_configurable_must_satisfy_the_configurable_schema(host):
    wid = unique("cfg")
    schema = {
        "type": "object",
        "required": ["run"],
        "properties": {"run": {"type": "object", "required": ["recursionLimit"]}},
    }
    doc = _noop(wid)
    doc["configurableSchema"] = schema
    assert _post(host, doc).status == 201
    assert host.client(host.key_a).workflows_get(wid)["configurableSchema"] == schema
    bad = raw(host.base_url, "POST", "/runs", {"workflowId": wid, "configurable": {"version": 1}}, key=host.key_a)
    assert _errors(bad) == [{"pointer": "/configurable", "keyword": "required"}]
    assert raw(host.base_url, "POST", "/runs", {"workflowId": wid}, key=host.key_a).status == 400
    ok = raw(
        host.base_url,
        "POST",
        "/runs",
        {"workflowId": wid, "configurable": {"version": 1, "run": {"recursionLimit": 5}}},
        key=host.key_a,
    )
    assert ok.status == 201


# ---------------------------------------------------------------------------- bounds


def test_a_thousand_node_chain_registers_and_runs(host):
    wid = unique("chain")
    assert _post(host, chain(wid, 1000)).status == 201
    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId=wid)).runId
    assert wait_terminal(client, run, timeout=120).status == "completed"
    events = all_events(client, run)
    assert len(events) == 2 + 2 * 1000 and events[-2].nodeId == "n999"


def test_more_than_the_node_bound_is_refused_never_a_crash(host):
    # Node bodies kept tiny so 10,001 of them fit under the 1 MB body limit: the bound answers, not the size
    doc = chain(unique("huge"), 10_001)
    body = json.dumps(doc, separators=(",", ":")).encode()
    r = raw(host.base_url, "POST", REG, key=host.key_a, data=body, headers={"Content-Type": "application/json"})
    assert r.status in (400, 413)
    if r.status == 400:
        assert _errors(r) == [{"pointer": "/nodes", "keyword": "maxItems"}]
    small = {"id": unique("huge"), "nodes": [{}] * 10_001, "edges": []}
    r2 = _post(host, small)
    assert _errors(r2) == [{"pointer": "/nodes", "keyword": "maxItems"}]


def test_a_huge_body_is_413(host):
    doc = _noop(unique("big"))
    from shared.protocol.body import MAX_REQUEST_BODY_BYTES

    doc["description"] = "x" * (MAX_REQUEST_BODY_BYTES + 100_000)
    r = _post(host, doc)
    assert r.status == 413 and r.json["error"] == "payload_too_large"
