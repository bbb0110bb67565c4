"""Issue 9 on the local front: every request, however malformed, gets the protocol's JSON envelope, promptly.

Raw sockets to 127.0.0.1 only, bounded loops, short timeouts.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from shared.local.front import LocalFront
from shared.manifest import routes
from shared.protocol.body import MAX_REQUEST_BODY_BYTES

Route = routes.Route
ROUTES = (
    Route("GET", "/runs/{runId}", "echo"),
    Route("POST", "/runs/{runId}", "echo"),
    Route("ANY", routes.DEFAULT_ROUTE, "echo", auth=False),
)


def echo(_name: str, event: dict[str, Any]) -> dict[str, Any]:
    return {
        "statusCode": 200,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps({"length": len(event.get("body") or "")}),
    }


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    front = LocalFront(routes=ROUTES, invoke=echo)
    base_url = front.start("127.0.0.1", 0)
    yield int(base_url.rsplit(":", 1)[1])
    front.stop()


def exchange(port: int, data: bytes, timeout: float = 3.0) -> tuple[int, dict[str, str], bytes, float]:
    """Send raw bytes, read until the server closes (or ``timeout``); status, headers, body, seconds taken."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        received = b""
        try:
            for _ in range(1000):
                got = sock.recv(65536)
                if not got:
                    break
                received += got
        except TimeoutError:
            pass
    elapsed = time.monotonic() - started
    head, _, body = received.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0].startswith("HTTP/1.1 "), received[:200]
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body, elapsed


def assert_envelope(headers: dict[str, str], body: bytes, code: str) -> None:
    assert headers["content-type"] == "application/json" and headers["openwop-version"] == "2.0"
    doc = json.loads(body)
    assert doc["error"] == code and doc["message"] and set(doc) == {"error", "message"}


@pytest.mark.parametrize("method", ["TRACE", "CONNECT", "PROPFIND", "MKCOL", "BREW"])
def test_unsupported_methods_are_405_envelopes_with_allow(port, method):
    status, headers, body, _ = exchange(port, f"{method} /runs/r1 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert status == 405
    assert_envelope(headers, body, "openwop-serverless.method_not_allowed")
    assert headers["allow"] == "GET, POST"


@pytest.mark.parametrize("length", ["abc", "-1", "1e3", "+5", "5, 6"])
def test_a_malformed_content_length_is_a_prompt_400(port, length):
    status, headers, body, elapsed = exchange(
        port, f"POST /runs/r1 HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n{{}}".encode()
    )
    assert status == 400 and elapsed < 2.0
    assert_envelope(headers, body, "validation_error")


@pytest.mark.parametrize(
    "chunks", [b"zz\r\nab\r\n0\r\n\r\n", b"2\r\nabcdef\r\n0\r\n\r\n", b"-2\r\nab\r\n0\r\n\r\n", b"2;x\r\nabXY0\r\n\r\n"]
)
def test_bad_chunked_framing_is_a_400(port, chunks):
    request = b"POST /runs/r1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks
    status, headers, body, elapsed = exchange(port, request, timeout=2.0)
    assert status == 400
    assert_envelope(headers, body, "validation_error")


def test_an_unknown_transfer_coding_is_a_400(port):
    request = b"POST /runs/r1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n"
    status, headers, body, _ = exchange(port, request)
    assert status == 400
    assert_envelope(headers, body, "validation_error")


def test_good_chunked_framing_is_still_read(port):
    request = (
        b"POST /runs/r1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        b"3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    status, _, body, _ = exchange(port, request)
    assert status == 200 and json.loads(body) == {"length": 5}


def test_a_declared_10_mb_body_is_refused_before_it_is_sent(port):
    # Given only the head of a 10 MB request (the body is never sent)
    request = b"POST /runs/r1 HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n"
    status, headers, body, elapsed = exchange(port, request, timeout=5.0)
    # Then the 413 envelope arrives without the front waiting for (or reading) the body
    assert status == 413 and headers["connection"] == "close"
    assert_envelope(headers, body, "payload_too_large")


def test_an_oversized_body_sent_whole_still_gets_the_413(port):
    # Given a client that sends its whole 2 MB body before reading (as most clients do)
    payload = b"x" * (2 * MAX_REQUEST_BODY_BYTES)
    request = f"POST /runs/r1 HTTP/1.1\r\nHost: x\r\nContent-Length: {len(payload)}\r\n\r\n".encode() + payload
    status, headers, body, _ = exchange(port, request, timeout=5.0)
    assert status == 413
    assert_envelope(headers, body, "payload_too_large")


def test_expect_100_continue_with_an_oversized_length_answers_413_instead(port):
    request = b"POST /runs/r1 HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5000000\r\n\r\n"
    status, headers, body, _ = exchange(port, request)
    assert status == 413
    assert_envelope(headers, body, "payload_too_large")


def test_a_chunked_body_over_the_limit_is_413(port):
    # (only the chunk's size line: the front refuses on it and closes, so a client still sending the body would meet
    # a closed connection)
    chunk = b"%x\r\n" % (MAX_REQUEST_BODY_BYTES + 1)
    request = b"POST /runs/r1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk
    status, headers, body, _ = exchange(port, request, timeout=5.0)
    assert status == 413
    assert_envelope(headers, body, "payload_too_large")


@pytest.mark.parametrize("line", [b"GARBAGE", b"GET /runs/r1 HTTP/9.9", b"GET /runs/r1 XYZ/1.1", b"GET"])
def test_an_unparsable_request_line_is_a_400_envelope(port, line):
    status, headers, body, _ = exchange(port, line + b"\r\nHost: x\r\n\r\n")
    assert status == 400
    assert_envelope(headers, body, "validation_error")


def test_an_overlong_request_line_is_a_400_envelope(port):
    status, headers, body, _ = exchange(port, b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n")
    assert status == 400
    assert_envelope(headers, body, "validation_error")


def test_fifty_simultaneous_connects_are_accepted_at_once(port):
    # Given 50 clients connecting at the same instant (the stdlib backlog of 5 made some wait 1-4 s)
    times: list[float] = []
    barrier = threading.Barrier(50)

    def connect() -> None:
        barrier.wait(timeout=5)
        started = time.monotonic()
        status, _, _, _ = exchange(port, b"GET /runs/r1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert status == 200
        times.append(time.monotonic() - started)

    threads = [threading.Thread(target=connect) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    # Then every one is answered well under the 1 s SYN retransmit a full backlog would cost
    assert len(times) == 50 and max(times) < 0.9, sorted(times)[-5:]
