"""The agent gateway served from its Lambda function URL (decision 0143, "On AWS"): the handler answers the URL's
payload-v2 event (no ``pathParameters``) as it answers the HTTP API route's, on the local stack."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from functions.agent_gateway import handler as app
from tests.integration.test_agent_sessions import BASE, _agent, _register, _session, _status
from tests.unit.test_gateway_function_url import url_event


def test_a_session_completes_through_a_function_url_event(host):
    # Given a session of an external agent
    session = _session(host, _register(host, _agent()))
    path = urlsplit(session["completeUrl"]).path
    # When its agent ends it through the function URL (the event Lambda builds for the URL: no pathParameters)
    event = url_event(path, body=json.dumps({"output": {"answer": "reset sent"}}))
    wrong = app.lambda_handler({**event, "headers": {**event["headers"], "authorization": "Bearer owg_nope"}}, None)
    out = app.lambda_handler(
        {**event, "headers": {**event["headers"], "authorization": f"Bearer {session['token']}"}}, None
    )
    # Then a wrong token is the 401 and the session's token completes the run, as through the route
    assert wrong["statusCode"] == 401 and json.loads(wrong["body"])["error"] == "unauthenticated"
    assert out["statusCode"] == 200, out["body"]
    assert json.loads(out["body"]) == {"runId": session["runId"], "status": "completed"}
    assert _status(host, session["runId"])["status"] == "completed"
    # and a path the gateway does not serve is the protocol's 404, token or not
    outside = app.lambda_handler(url_event(f"{BASE}/runs"), None)
    assert outside["statusCode"] == 404 and json.loads(outside["body"])["error"] == "not_found"
