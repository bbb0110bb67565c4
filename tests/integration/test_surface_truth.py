"""What the document promises at the edges, over HTTP on the local host: 405 with Allow for a method a path does not
serve, CORS as API Gateway's configuration answers it, I-JSON bodies (a repeated member is refused), the bulk-cancel
cap decided before the ids, and query values the document constrains refused rather than ignored."""

from __future__ import annotations

import pytest

from shared import manifest
from shared.manifest import matching, routes
from tests.wire import raw

METHOD_ERROR = "openwop-serverless.method_not_allowed"
ORIGIN = "https://app.example"


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("PUT", "/runs", "GET, POST"),
        ("PATCH", "/runs/tenant-a~2F0000000000000000", "DELETE, GET"),
        ("POST", "/runs/tenant-a~2F0000000000000000", "DELETE, GET"),  # POST rides the route for its :verbs only
        ("DELETE", "/runs/tenant-a~2F0000000000000000:diff", "GET"),
        ("GET", "/runs/tenant-a~2F0000000000000000:fork", "POST"),
        ("GET", "/runs:bulk-cancel", "POST"),
        ("DELETE", "/tools/acme.crm:lookup", "GET"),
        ("POST", "/.well-known/openwop", "GET"),
    ],
)
def test_a_method_the_path_does_not_serve_is_405_with_allow(host, method, path, allow):
    # Given a path the document declares, with a method it does not declare there
    got = raw(host.base_url, method, path, key=host.key_a)
    # Then the answer is 405 with the methods it does serve, in the protocol's envelope, before any credential check
    assert got.status == 405, got.text
    assert got.headers["allow"] == allow
    assert got.json == {"error": METHOD_ERROR, "message": "This method is not served here."}
    assert raw(host.base_url, method, path).status == 405  # no key: the method is refused first


def test_an_undeclared_path_stays_404_whatever_the_method(host):
    # Given paths no operation has (an unadvertised gated operation among them)
    for method, path in (
        ("PUT", "/prompts"),
        ("GET", "/runs/tenant-a~2F0000000000000000/ancestry"),
        ("DELETE", "/nowhere"),
    ):
        got = raw(host.base_url, method, path, key=host.key_a)
        # Then they are the 404 envelope (errors.md: an unadvertised operation is not_found), never a 405
        assert (got.status, got.json["error"]) == (404, "not_found"), (method, path, got.text)


def test_a_plain_options_lists_the_methods(host):
    # Given an OPTIONS that is not a CORS preflight (no Origin)
    got = raw(host.base_url, "OPTIONS", "/runs")
    # Then it answers 204 with Allow (RFC 9110 §9.3.7)
    assert (got.status, got.headers["allow"], got.text) == (204, "GET, POST", "")


def test_a_preflight_admits_every_declared_request_header_and_method(host):
    # Given a browser's preflight for an authenticated JSON POST with an idempotency key
    got = raw(
        host.base_url,
        "OPTIONS",
        "/runs/tenant-a~2F0000000000000000:fork",
        headers={
            "Origin": ORIGIN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type,idempotency-key,openwop-version",
        },
    )
    # Then API Gateway's answer (the local front does the same): granted, every method, every header by name
    assert got.status == 204
    assert got.headers["access-control-allow-origin"] == "*"
    assert set(got.headers["access-control-allow-methods"].split(",")) == {"GET", "POST", "PUT", "DELETE"}
    admitted = got.headers["access-control-allow-headers"].split(",")
    assert {
        "authorization",
        "content-type",
        "idempotency-key",
        "openwop-version",
        "openwop-client-version",
        "if-none-match",
        "last-event-id",
    } <= set(admitted)
    assert int(got.headers["access-control-max-age"]) == manifest.CORS.max_age_s
    assert "access-control-allow-credentials" not in got.headers  # bearer keys only: never credentials mode


def test_an_actual_cross_origin_answer_carries_the_cors_headers(host):
    # Given a cross-origin read of a run that does not exist (an error answer)
    got = raw(host.base_url, "GET", "/runs/tenant-a~2F0000000000000000", key=host.key_a, headers={"Origin": ORIGIN})
    # Then the answer, error or not, lets the page read it and its protocol headers
    assert got.status == 404
    assert got.headers["access-control-allow-origin"] == "*"
    assert {"OpenWOP-Version", "ETag", "Retry-After"} <= set(got.headers["access-control-expose-headers"].split(","))
    # and a same-origin request (no Origin) gets none
    assert "access-control-allow-origin" not in raw(host.base_url, "GET", "/.well-known/openwop").headers


def test_an_allowlist_grants_only_its_origins(host):
    from shared.local.front import LocalFront

    # Given a front whose CORS configuration lists one origin
    front = LocalFront(cors_origins=manifest.cors_origins(f"{ORIGIN}/"))
    base_url = front.start("127.0.0.1", 0)
    try:
        preflight = {"Access-Control-Request-Method": "GET"}
        granted = raw(base_url, "OPTIONS", "/runs", headers={"Origin": ORIGIN, **preflight})
        other = raw(base_url, "OPTIONS", "/runs", headers={"Origin": "https://evil.example", **preflight})
        # Then that origin is echoed (with Vary: Origin) and any other gets no grant
        assert (granted.headers["access-control-allow-origin"], granted.headers["vary"]) == (ORIGIN, "Origin")
        assert other.status == 204 and "access-control-allow-origin" not in other.headers
    finally:
        front.stop()


@pytest.mark.parametrize(
    "text",
    [
        '{"runIds": ["a"], "runIds": ["b"]}',
        '{"runIds": ["a"], "reason": {"x": 1, "x": 2}}',
        '{"runIds": ["a"], "run\\u0049ds": ["b"]}',
    ],
)
def test_a_repeated_member_name_is_refused_naming_it(host, text):
    # Given a body whose meaning would depend on the parser's duplicate rule (RFC 7493 §2.3)
    got = raw(
        host.base_url,
        "POST",
        "/runs:bulk-cancel",
        key=host.key_a,
        data=text.encode(),
        headers={"Content-Type": "application/json"},
    )
    # Then it is a 400 validation_error naming the member (after unescaping, so an escaped spelling is the same)
    assert got.status == 400
    assert got.json["error"] == "validation_error"
    assert got.json["details"]["member"] in ("runIds", "x")


def test_the_bulk_cancel_cap_is_decided_before_the_ids(host):
    # Given 101 entries that are not even run ids (numbers, another tenant's shape, nulls)
    ids: list[object] = [
        *range(50),
        *(f"openwop-conformance-bulk-cap/opaque{i:03d}0123456789abcdef" for i in range(50)),
        None,
    ]
    got = raw(host.base_url, "POST", "/runs:bulk-cancel", {"runIds": ids}, key=host.key_a)
    # Then the refusal is the cap's, with details.maxRunIds, not one about the ids
    assert got.status == 400
    assert got.json == {
        "error": "validation_error",
        "message": "At most 100 runIds per request.",
        "details": {"maxRunIds": 100},
    }
    # and an empty list is refused too (runIds[1..100])
    assert raw(host.base_url, "POST", "/runs:bulk-cancel", {"runIds": []}, key=host.key_a).status == 400


def test_an_empty_version_header_names_no_version(host):
    # Given OpenWOP-Version present but empty
    got = raw(host.base_url, "GET", "/tools", key=host.key_a, headers={"OpenWOP-Version": ""})
    # Then it is refused like any unlisted value (absent would be the preferred version)
    assert got.status == 406 and got.json["error"] == "protocol_version_unsupported"


@pytest.mark.parametrize("query", ["?workflowId=", "?workflowId=a%20b", "?status=bogus", "?cursor="])
def test_a_run_list_value_outside_the_document_is_400(host, query):
    # Given a GET /runs query value the document's grammar excludes
    got = raw(host.base_url, "GET", f"/runs{query}", key=host.key_a)
    # Then it is refused, never read as "no filter"
    assert got.status == 400 and got.json["error"] == "validation_error"


def test_every_route_serves_exactly_the_operations_the_document_declares():
    from shared.services.openapi import document

    # Given the served document and the route table
    declared = {(m.upper(), path) for path, ops in document()["paths"].items() for m in ops}
    served = {(r.method, op) for r in routes.ROUTES for op in r.operations}
    seams = {(m, op) for m, op in served if matching.is_seam_path(op)}
    # Then they name the same (method, path) pairs, so a 405's Allow is the document's own list; the conformance
    # seams and RFC 0158's durability hook alone are left out (api/seams-v2.yaml; the hook advertises nothing): a
    # certification-stage surface, off by default
    assert declared == served - seams
    assert seams == {
        ("POST", "/conformance/seams/sample/event-log/seed"),
        ("POST", "/conformance/seams/sample/effect-seams/fire"),
        ("POST", "/conformance/seams/sample/mcp/invoke"),
        ("GET", "/host/durability/kill"),
        ("POST", "/host/durability/kill"),
    }


def test_an_integer_written_with_a_fraction_is_the_integer(host):
    # Given a create whose integer members are written with a fraction and an exponent
    text = '{"workflowId": "conformance-noop", "configurable": {"version": 1.0, "run": {"recursionLimit": 1e2}}}'
    got = raw(
        host.base_url, "POST", "/runs", key=host.key_a, data=text.encode(), headers={"Content-Type": "application/json"}
    )
    # Then they are those integers (JSON Schema's integer admits 1.0; RFC 8785 writes it 1), and a fraction is not
    assert got.status == 201, got.text
    half = text.replace("1e2", "1.5")
    assert (
        raw(
            host.base_url,
            "POST",
            "/runs",
            key=host.key_a,
            data=half.encode(),
            headers={"Content-Type": "application/json"},
        ).status
        == 400
    )


def test_a_client_below_min_client_version_is_refused_426_naming_the_floor(host):
    # Given the host's advertised floor
    doc = raw(host.base_url, "GET", "/.well-known/openwop").json
    assert doc["minClientVersion"] == "2.0"

    def asked(client_version: str | None, method: str = "GET", path: str = "/.well-known/openwop"):
        headers = {} if client_version is None else {"OpenWOP-Client-Version": client_version}
        return raw(
            host.base_url,
            method,
            path,
            {"workflowId": "conformance-noop"} if method == "POST" else None,
            key=host.key_a,
            headers=headers,
        )

    # When clients announce versions below it, at it, above it, malformed ones, or none
    # Then a well-formed version below the floor is refused 426 with the floor, on any route, before anything else
    for below in ("0.0.1", "1.9", "1.99.7"):
        for method, path in (("GET", "/.well-known/openwop"), ("POST", "/runs"), ("GET", "/runs")):
            answer = asked(below, method, path)
            assert (answer.status, answer.json) == (
                426,
                {
                    "error": "client_version_unsupported",
                    "message": answer.json["message"],
                    "details": {"minClientVersion": "2.0"},
                },
            ), (below, method, path)
    # and the major and minor decide, never the patch; a value outside the grammar is as if absent
    for served in ("2.0", "2.0.0", "2.0.99", "2.46.32", "10.1", "not-a-version", "1", "01.0", "1.0-rc.1", "", None):
        assert asked(served).status == 200, served
    # and the official client (which announces its corpus release) is served
    assert host.client(host.key_a).runs_list().runs is not None
