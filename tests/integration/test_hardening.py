"""Issue 9: no 5xx on any input. Bodies that are not UTF-8, nest too deep, are too large, carry non-JSON numbers,
have the wrong media type or the wrong number types are refused with the protocol's envelope."""

from __future__ import annotations

import base64
import http.client
import json
from typing import Any

import pytest
from openwop_client.types import CreateRunRequest

from shared.local.front import build_event
from shared.manifest import routes
from shared.protocol.body import MAX_JSON_DEPTH, MAX_REQUEST_BODY_BYTES
from tests.wire import Raw, raw

JSON = {"Content-Type": "application/json"}
NOOP = {"workflowId": "conformance-noop"}


@pytest.fixture(scope="module")
def run_path(host: Any) -> str:
    created = host.client(host.key_a).runs_create(CreateRunRequest(workflowId="conformance-noop"))
    return "/runs/" + created.runId.replace("/", "~2F")


def post(host: Any, path: str, data: bytes, headers: dict[str, str] | None = None) -> Raw:
    return raw(host.base_url, "POST", path, key=host.key_a, data=data, headers={**JSON, **(headers or {})})


def assert_refused(r: Raw, status: int, code: str) -> None:
    assert r.status == status, r.text
    assert r.json["error"] == code and r.json["message"]
    assert set(r.json) <= {"error", "message", "details"}
    assert "Traceback" not in r.text and "test-key" not in r.text
    assert r.headers["content-type"] == "application/json" and r.headers["openwop-version"] == "2.0"


def invoke(
    host: Any,
    function: str,
    method: str,
    path: str,
    body: str,
    *,
    b64: bool = False,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Call a Lambda the way API Gateway does (the front cannot send some bodies, e.g. invalid base64)."""
    route = next(r for r in routes.ROUTES if r.function == function)
    h = {"authorization": f"Bearer {host.key_a}", "content-type": "application/json", **(headers or {})}
    event = build_event(
        method=method,
        raw_path=path,
        raw_query="",
        headers=list(h.items()),
        body=None,
        route=route,
        path_parameters={},
        source_ip="127.0.0.1",
    )
    event["body"], event["isBase64Encoded"] = body, b64
    result: dict[str, Any] = host.front.invoke(function, event)
    return result


# -- 1. bodies that are not UTF-8 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["/runs", "{run}:fork", "{run}/cancel", "/host/openwop-serverless/eval-suites"])
def test_non_utf8_body_is_400(host, run_path, target):
    # Given a body that is not UTF-8 (the front passes it base64-encoded, as API Gateway does)
    path = target.replace("{run}", run_path)
    # When it is posted / Then the answer is the 400 envelope, not a 500
    assert_refused(post(host, path, b'{"workflowId": "\xff\xfe"}'), 400, "validation_error")


@pytest.mark.parametrize("body", ["not base64!", base64.b64encode(b"\xc3\x28").decode()])
def test_undecodable_base64_event_body_is_400(host, body):
    # Given an API Gateway event whose base64 body is malformed or decodes to invalid UTF-8
    result = invoke(host, "create_run", "POST", "/runs", body, b64=True)
    # Then the Lambda answers 400 validation_error
    assert result["statusCode"] == 400 and json.loads(result["body"])["error"] == "validation_error"


def test_lone_surrogate_escape_is_400(host):
    # Given a \ud800 escape (valid JSON syntax, but no UTF-8 can store it)
    r = post(host, "/runs", b'{"workflowId": "conformance-noop", "inputs": {"x": "\\ud800"}}')
    assert_refused(r, 400, "validation_error")


# -- 2. nesting ------------------------------------------------------------------------------------------------------


def nested(depth: int) -> dict[str, Any]:
    """A create body whose whole document nests exactly ``depth`` levels (the body object is level 1)."""
    inner: Any = {}
    for _ in range(depth - 2):
        inner = {"a": inner}
    return {**NOOP, "metadata": inner}


def test_deeply_nested_arrays_are_400(host):
    assert_refused(post(host, "/runs", b"[" * 100_000 + b"]" * 100_000), 400, "validation_error")


def test_metadata_nested_500_deep_is_400(host):
    assert_refused(post(host, "/runs", json.dumps(nested(500)).encode()), 400, "validation_error")


def test_nesting_limit_is_exact(host):
    # Brackets inside strings do not count
    at_limit = {**nested(MAX_JSON_DEPTH), "tags": ["[[[[{{{{" * 20]}
    assert post(host, "/runs", json.dumps(at_limit).encode()).status == 201
    assert_refused(post(host, "/runs", json.dumps(nested(MAX_JSON_DEPTH + 1)).encode()), 400, "validation_error")


# -- 3. size ---------------------------------------------------------------------------------------------------------


def padded(size: int) -> bytes:
    doc = json.dumps(NOOP).encode()
    return doc + b" " * (size - len(doc))


def test_body_at_the_limit_is_served_and_one_byte_more_is_413(host):
    assert post(host, "/runs", padded(MAX_REQUEST_BODY_BYTES)).status == 201
    assert_refused(post(host, "/runs", padded(MAX_REQUEST_BODY_BYTES + 1)), 413, "payload_too_large")


def test_discovery_advertises_the_enforced_limit(host):
    doc = raw(host.base_url, "GET", "/.well-known/openwop").json
    assert doc["limits"]["maxRequestBodyBytes"] == MAX_REQUEST_BODY_BYTES


@pytest.mark.parametrize("b64", [False, True])
def test_lambda_refuses_an_oversized_body_before_parsing(host, b64):
    # Given an event API Gateway passed through (it allows up to 10 MB): a body just above our limit, not JSON
    body = b"[" * (MAX_REQUEST_BODY_BYTES + 1)
    text = base64.b64encode(body).decode() if b64 else body.decode()
    # When the create Lambda receives it
    result = invoke(host, "create_run", "POST", "/runs", text, b64=b64)
    # Then it is 413 payload_too_large (size is checked before any parse)
    assert result["statusCode"] == 413
    assert json.loads(result["body"]) == {
        "error": "payload_too_large",
        "message": "The request body is larger than limits.maxRequestBodyBytes.",
    }


# -- 4. NaN and infinities -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("number", [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e400"])
def test_non_finite_numbers_are_400(host, number):
    body = b'{"workflowId": "conformance-noop", "inputs": {"x": ' + number + b"}}"
    assert_refused(post(host, "/runs", body), 400, "validation_error")


def test_non_finite_numbers_in_a_fork_overlay_are_400(host, run_path):
    body = b'{"mode": "branch", "fromSeq": 0, "runOptionsOverlay": {"metadata": {"x": NaN}}}'
    assert_refused(post(host, f"{run_path}:fork", body), 400, "validation_error")


# -- 5. media type and strict numbers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin-1", "application/jsonx"],
)
def test_a_body_that_is_not_json_typed_is_415(host, content_type):
    r = raw(
        host.base_url,
        "POST",
        "/runs",
        key=host.key_a,
        data=json.dumps(NOOP).encode(),
        headers={"Content-Type": content_type},
    )
    assert_refused(r, 415, "unsupported_media_type")


def test_a_body_without_a_content_type_is_415(host):
    # Given a JSON body sent with no Content-Type at all (urllib would add a form type, so http.client)
    body = json.dumps(NOOP).encode()
    conn = http.client.HTTPConnection(host.base_url.removeprefix("http://"), timeout=30)
    try:
        conn.request("POST", "/runs", body=body, headers={"Authorization": f"Bearer {host.key_a}"})
        resp = conn.getresponse()
        r = Raw(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read().decode())
    finally:
        conn.close()
    assert_refused(r, 415, "unsupported_media_type")


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/vnd.openwop+json",
        'application/json;charset="UTF-8"',
    ],
)
def test_json_media_types_are_served(host, content_type):
    r = raw(
        host.base_url,
        "POST",
        "/runs",
        key=host.key_a,
        data=json.dumps(NOOP).encode(),
        headers={"Content-Type": content_type},
    )
    assert r.status == 201, r.text


def test_empty_cancel_without_a_content_type_is_still_served(host):
    created = host.client(host.key_a).runs_create(
        CreateRunRequest(workflowId="conformance-replay-side-effect", inputs={"delayMs": 20000})
    )
    r = raw(host.base_url, "POST", "/runs/" + created.runId.replace("/", "~2F") + "/cancel", key=host.key_a)
    assert r.status == 200 and r.json["status"] == "cancelled"


@pytest.mark.parametrize(
    "configurable",
    [
        {"version": 1, "distillation": {"tokenBudget": False}},
        {"version": 1, "distillation": {"tokenBudget": "3"}},
        {"version": 1, "run": {"recursionLimit": True}},
        {"version": 1, "ai": {"maxTokens": "12"}},
        {"version": 1, "ai": {"temperature": True}},
        {"version": True},
    ],
)
def test_a_bool_or_string_where_a_number_is_expected_is_400(host, configurable):
    r = raw(host.base_url, "POST", "/runs", {**NOOP, "configurable": configurable}, key=host.key_a)
    assert_refused(r, 400, "validation_error")


def test_numbers_of_the_right_type_are_served(host):
    configurable = {"version": 1, "distillation": {"tokenBudget": 0}, "ai": {"temperature": 1, "maxTokens": 5}}
    assert raw(host.base_url, "POST", "/runs", {**NOOP, "configurable": configurable}, key=host.key_a).status == 201
