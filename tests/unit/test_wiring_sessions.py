"""The ports' AWS clients come from one boto3 session per region (``shared.wiring``): a function's second client
reuses the session's loaded data instead of reading it again."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shared import wiring


@pytest.fixture(autouse=True)
def _credentials(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    wiring.reset_ports()
    yield
    wiring.reset_ports()  # no session with this test's credential outlives it (a worker's later tests build anew)


def test_other_credentials_in_the_environment_get_a_session_of_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a client built under one credential
    first = wiring._client("dynamodb", "us-east-1")
    # When the environment names another (the operator CLI's --stack, a restarted local endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "other")
    second = wiring._client("dynamodb", "us-east-1")
    # Then the new client signs with it, from a new session; back to the first, the first session serves again
    assert second._loader is not first._loader
    assert second._request_signer._credentials.access_key == "other"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    assert wiring._client("secretsmanager", "us-east-1")._loader is first._loader


def test_clients_of_a_region_share_one_session_and_a_reset_forgets_it() -> None:
    # When two services' clients are built for one region, and one for another
    table = wiring._client("dynamodb", "us-east-1")
    secrets = wiring._client("secretsmanager", "us-east-1")
    other = wiring._client("dynamodb", "eu-west-1")
    # Then the first two read their service data through one loader (one session), the third through its own
    assert table._loader is secrets._loader
    assert other._loader is not table._loader
    assert table.meta.region_name == "us-east-1" and other.meta.region_name == "eu-west-1"
    # And after a reset (local mode's new endpoint and credential) a client comes from a new session
    wiring.reset_ports()
    assert wiring._client("dynamodb", "us-east-1")._loader is not table._loader


def test_a_ports_dynamodb_client_is_built_ahead_only_for_ports_wiring_built() -> None:
    from dataclasses import replace

    from shared.settings import get_settings

    # Given ports wiring built, their DynamoDB client not yet built
    before = wiring.clients_built().get("dynamodb", 0)
    ports = wiring.build_ports(get_settings())
    assert wiring.clients_built().get("dynamodb", 0) == before
    # When it is built ahead (a function's init), it is built once, and again is nothing
    wiring.build_dynamodb_client(ports)
    wiring.build_dynamodb_client(ports)
    assert wiring.clients_built()["dynamodb"] == before + 1
    # And ports whose run store wiring did not build (a test's own) get nothing built
    wiring.build_dynamodb_client(replace(wiring.build_ports(get_settings()), runs=object()))  # type: ignore[arg-type]
    assert wiring.clients_built()["dynamodb"] == before + 1
