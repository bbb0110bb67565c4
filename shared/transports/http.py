"""The HttpTransport port over the standard library, through the egress guard.

One request: parse the URL (http or https only), resolve the host once through the egress policy (which refuses
guarded addresses before any connection), then connect to the first resolved address that accepts, sending the
original ``Host`` header and, for https, SNI and certificate checks against the host name. Redirects are not
followed (a 3xx is returned as it is). The answer is read up to ``max_bytes``; a larger one is a
``TransportError``. Nothing here logs headers or bodies.
"""

from __future__ import annotations

import http.client
import socket
import ssl
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from shared.ports import HttpReply, TransportError
from shared.transports.egress import EgressPolicy, check_url

Connect = Callable[[tuple[str, int], float], socket.socket]


def _default_connect(address: tuple[str, int], timeout: float) -> socket.socket:
    return socket.create_connection(address, timeout=timeout)


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection to an address the guard already checked (the name is never resolved again)."""

    def __init__(self, host: str, port: int, address: str, timeout: float, connect: Connect) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address
        self._connect = connect

    def connect(self) -> None:
        self.sock = self._connect((self._address, self.port), float(self.timeout or 10))


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(
        self, host: str, port: int, address: str, timeout: float, connect: Connect, context: ssl.SSLContext
    ) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._address = address
        self._connect = connect
        self._ctx = context

    def connect(self) -> None:
        raw = self._connect((self._address, self.port), float(self.timeout or 10))
        self.sock = self._ctx.wrap_socket(raw, server_hostname=self.host)


class GuardedHttpTransport:
    def __init__(
        self, policy: EgressPolicy, *, connect: Connect | None = None, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        self._policy = policy
        self._connect = connect or _default_connect
        self._ssl = ssl_context

    def send(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None, *, timeout_s: float, max_bytes: int
    ) -> HttpReply:
        target = check_url(self._policy, url, "tool")  # EgressRefusedError before any connection
        parts = urlsplit(url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        last: Exception | None = None
        for address in target.addresses:
            conn = self._connection(target.scheme, target.host, target.port, address, timeout_s)
            try:
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read(max_bytes + 1)
                if len(data) > max_bytes:
                    raise TransportError(f"the tool's answer is larger than {max_bytes} bytes")
                return HttpReply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
            except TransportError:
                raise
            except (ConnectionRefusedError, socket.gaierror) as exc:
                last = exc  # this address does not accept: try the next one the guard passed
                continue
            except TimeoutError as exc:
                raise TransportError("the tool did not answer in time") from exc
            except (OSError, http.client.HTTPException, ssl.SSLError) as exc:
                raise TransportError("the connection to the tool failed") from exc
            finally:
                conn.close()
        raise TransportError("the tool's host refused the connection") from last

    def check(self, url: str) -> bool:
        target = check_url(self._policy, url, "webhook")
        return self._policy.allowlisted(target.host, target.addresses)

    def _connection(self, scheme: str, host: str, port: int, address: str, timeout_s: float) -> Any:
        if scheme == "https":
            ctx = self._ssl or ssl.create_default_context()
            return _PinnedHTTPSConnection(host, port, address, timeout_s, self._connect, ctx)
        return _PinnedHTTPConnection(host, port, address, timeout_s, self._connect)
