"""The egress guard refuses guarded destinations before any connection is attempted.

Names are resolved by an injected resolver, and the socket layer is one that fails the test if it is ever called:
no test here sends traffic anywhere but to a listening loopback socket of its own.
"""

from __future__ import annotations

import socket

import pytest

from shared.ports import EgressRefusedError, TransportError
from shared.transports.egress import EgressPolicy, classify
from shared.transports.http import GuardedHttpTransport


def _never_connect(address, timeout):  # noqa: ANN001
    raise AssertionError(f"a connection was attempted to {address}")


def _resolver(mapping: dict[str, list[str]]):
    def resolve(host: str, port: int) -> list[str]:
        return mapping[host]

    return resolve


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("169.254.169.254", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("10.0.0.5", "private"),
        ("172.16.3.4", "private"),
        ("192.168.1.1", "private"),
        ("fd00::1", "private"),
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("0.0.0.0", "reserved"),
        ("224.0.0.1", "reserved"),
        ("100.64.0.1", "private"),
    ],
)
def test_a_name_resolving_to_a_guarded_address_is_refused_before_connecting(address, why):
    # Given a tool host name that resolves to a guarded address, and a socket layer that must never be used
    policy = EgressPolicy(resolver=_resolver({"tools.test.invalid": [address]}))
    transport = GuardedHttpTransport(policy, connect=_never_connect)
    # When a call is sent to it, Then it is refused with a reason naming the class, and nothing connected
    with pytest.raises(EgressRefusedError) as err:
        transport.send("POST", "http://tools.test.invalid/x", {}, b"{}", timeout_s=1, max_bytes=100)
    assert why in err.value.reason
    assert address not in err.value.reason


def test_one_guarded_address_among_public_ones_refuses_the_call():
    policy = EgressPolicy(resolver=_resolver({"split.test.invalid": ["93.184.216.34", "10.1.2.3"]}))
    with pytest.raises(EgressRefusedError):
        GuardedHttpTransport(policy, connect=_never_connect).send(
            "GET", "https://split.test.invalid/", {}, None, timeout_s=1, max_bytes=100
        )


def test_a_literal_metadata_url_is_refused_without_a_connection():
    transport = GuardedHttpTransport(
        EgressPolicy(resolver=_resolver({"169.254.169.254": ["169.254.169.254"]})), connect=_never_connect
    )
    with pytest.raises(EgressRefusedError):
        transport.send("GET", "http://169.254.169.254/latest/meta-data/", {}, None, timeout_s=1, max_bytes=100)


def test_loopback_is_refused_unless_allowlisted_and_the_listener_sees_no_connection():
    # Given a listening loopback socket
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        # When a call to it is made under the default policy (nothing allowlisted)
        with pytest.raises(EgressRefusedError):
            GuardedHttpTransport(EgressPolicy()).send(
                "GET", f"http://127.0.0.1:{port}/", {}, None, timeout_s=1, max_bytes=100
            )
        # Then no connection ever reached the listener
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()


def test_allowlisted_cidrs_and_names_pass_and_the_checked_address_is_the_one_connected():
    # Given a name that resolves to loopback, allowlisted by CIDR, and a socket layer that records its target
    targets: list[tuple[str, int]] = []

    def record(address, timeout):  # noqa: ANN001
        targets.append(address)
        raise ConnectionRefusedError()

    policy = EgressPolicy.from_entries(["127.0.0.0/8"], resolver=_resolver({"svc.test.invalid": ["127.0.0.9"]}))
    with pytest.raises(TransportError):
        GuardedHttpTransport(policy, connect=record).send(
            "GET", "http://svc.test.invalid:8080/x", {}, None, timeout_s=1, max_bytes=100
        )
    # Then it connected to the address the guard checked, never resolving the name again
    assert targets == [("127.0.0.9", 8080)]
    named = EgressPolicy.from_entries(["svc.test.invalid"], resolver=_resolver({"svc.test.invalid": ["10.9.9.9"]}))
    assert named.resolve("svc.test.invalid", 80) == ["10.9.9.9"]


def test_public_addresses_pass_the_classifier():
    assert classify("93.184.216.34") is None
    assert classify("2606:4700::6810:85e5") is None
    assert classify("not-an-ip") is not None


def test_urls_the_transport_cannot_send_are_transport_errors():
    transport = GuardedHttpTransport(EgressPolicy(resolver=_resolver({})), connect=_never_connect)
    for url in ("ftp://x/y", "http:///nohost", "http://x:notaport/"):
        with pytest.raises(TransportError):
            transport.send("GET", url, {}, None, timeout_s=1, max_bytes=100)
