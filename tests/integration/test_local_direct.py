"""Patch 16 (``shared.local.direct``): this process's calls to its own embedded endpoint are answered by the same
WSGI application without the loopback socket, with the same answers, refusals and errors as over HTTP."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, EndpointConnectionError

from shared.local import direct
from shared.local.environment import REGION
from shared.local.stack import LocalAws
from tests.helpers import unique


@pytest.fixture
def sockets(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URLs botocore sent over a real HTTP connection from this test's thread meanwhile (its own send, counted;
    runs an earlier test left behind call their own Lambda endpoints from other threads)."""
    sent: list[str] = []
    original = direct._original_send
    assert original is not None
    mine = threading.get_ident()

    def counted(session: Any, request: Any) -> Any:
        if threading.get_ident() == mine:
            sent.append(request.url)
        return original(session, request)

    monkeypatch.setattr(direct, "_original_send", counted)
    return sent


@pytest.fixture
def table(local_aws: LocalAws) -> Iterator[str]:
    name = unique("direct")
    ddb = local_aws.client("dynamodb")
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    yield name
    ddb.delete_table(TableName=name)


@contextmanager
def _over_http(local_aws: LocalAws) -> Iterator[None]:
    """The endpoint served over the socket only, inside the block."""
    netloc = f"{local_aws.host}:{local_aws.port}"
    app = direct._apps[netloc]
    direct.stop_serving(netloc)
    try:
        yield
    finally:
        direct.serve_in_process(netloc, app)


def test_a_call_to_the_own_endpoint_skips_the_socket_and_answers_as_over_http(local_aws, table, sockets):
    ddb = local_aws.client("dynamodb")
    # Given an item written and read in process
    ddb.put_item(TableName=table, Item={"pk": {"S": "a"}, "v": {"B": b"\x00\xffbytes"}})
    inside = ddb.get_item(TableName=table, Key={"pk": {"S": "a"}})
    refused = pytest.raises(
        ClientError,
        ddb.put_item,
        TableName=table,
        Item={"pk": {"S": "a"}},
        ConditionExpression="attribute_not_exists(pk)",
    )
    # Then nothing went through a socket
    assert sockets == []
    # And the same calls over HTTP answer the same item and the same refusal
    with _over_http(local_aws):
        outside = ddb.get_item(TableName=table, Key={"pk": {"S": "a"}})
        with pytest.raises(ClientError) as over_http:
            ddb.put_item(TableName=table, Item={"pk": {"S": "a"}}, ConditionExpression="attribute_not_exists(pk)")
    assert len(sockets) == 2
    assert inside["Item"] == outside["Item"] == {"pk": {"S": "a"}, "v": {"B": b"\x00\xffbytes"}}
    assert refused.value.response["Error"]["Code"] == over_http.value.response["Error"]["Code"]
    assert refused.value.response["Error"]["Code"] == "ConditionalCheckFailedException"


def test_the_endpoint_guard_still_refuses_a_foreign_credential_in_process(local_aws, table, sockets):
    # Given a client of this process signing with credentials that are not the endpoint's
    stranger = boto3.session.Session(aws_access_key_id="AKIASTRANGER", aws_secret_access_key="x").client(
        "dynamodb", region_name=REGION, endpoint_url=local_aws.endpoint
    )
    # Then it is refused as over HTTP, and nothing went through a socket
    with pytest.raises(ClientError) as refused:
        stranger.get_item(TableName=table, Key={"pk": {"S": "a"}})
    assert refused.value.response["Error"]["Code"] == "AccessDeniedException"
    assert sockets == []


def test_an_endpoint_not_served_here_goes_over_http(local_aws, sockets):
    # Given a port nothing listens on
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = boto3.session.Session().client(
        "dynamodb",
        region_name=REGION,
        endpoint_url=f"http://127.0.0.1:{port}",
        config=Config(retries={"max_attempts": 1}, connect_timeout=2),
    )
    # Then the call is sent over HTTP and refused as a closed port refuses it
    with pytest.raises(EndpointConnectionError):
        client.list_tables()
    assert sockets and all(url.startswith(f"http://127.0.0.1:{port}") for url in sockets)
