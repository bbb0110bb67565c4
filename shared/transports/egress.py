"""The egress guard: which addresses an outbound tool call may reach, decided on resolved addresses.

A URL's host is resolved once (through an injectable resolver); every resolved address is classified, and the
call is refused before any connection is attempted if one of them is private, loopback, link-local (which holds
the cloud metadata endpoints), multicast, reserved or unspecified, unless the operator allowlists it. The caller
then connects to the address this check returned (never resolving the name again), so a DNS answer that changes
between the check and the connection (rebinding) cannot reach a refused address.

Allowlist entries (``EGRESS_ALLOW`` setting, comma-separated): a CIDR (``127.0.0.0/8``, ``::1/128``,
``10.1.2.0/24``) lets addresses in it through; a host name (``tools.internal.example``) lets that name through
whatever it resolves to. The local mode allowlists loopback so tests and demos reach their own servers.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from shared.ports import EgressRefusedError, TransportError

Resolver = Callable[[str, int], Sequence[str]]
"""(host, port) -> the addresses it resolves to, as strings."""

# Cloud metadata endpoints (AWS IMDS v4 and v6, GCP, Azure, Alibaba): named so a refusal can say so.
METADATA_ADDRESSES = frozenset({"169.254.169.254", "fd00:ec2::254", "169.254.170.2", "100.100.100.200"})


def system_resolver(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise EgressRefusedError("the tool's host name does not resolve") from exc
    seen: list[str] = []
    for info in infos:
        addr = str(info[4][0])
        if addr not in seen:
            seen.append(addr)
    return seen


def classify(address: str) -> str | None:
    """Why an address is refused by default (None: a public address)."""
    try:
        ip: Any = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return "an address that is not an IP address"
    if getattr(ip, "ipv4_mapped", None) is not None:
        ip = ip.ipv4_mapped
    if str(ip) in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_unspecified or ip.is_multicast or ip.is_reserved:
        return "a reserved address"
    if ip.is_private or (ip.version == 4 and ip in ipaddress.ip_network("100.64.0.0/10")):
        return "a private address"
    if not ip.is_global:
        return "a non-public address"
    return None


@dataclass(frozen=True)
class EgressPolicy:
    allow_networks: tuple[Any, ...] = ()
    allow_hosts: frozenset[str] = frozenset()
    resolver: Resolver = system_resolver

    @classmethod
    def from_entries(cls, entries: Sequence[str], resolver: Resolver | None = None) -> EgressPolicy:
        nets, hosts = [], set()
        for raw in entries:
            entry = raw.strip()
            if not entry:
                continue
            try:
                nets.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                hosts.add(entry.lower().rstrip("."))
        return cls(tuple(nets), frozenset(hosts), resolver or system_resolver)

    def _allowed(self, address: str) -> bool:
        try:
            ip: Any = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return False
        if getattr(ip, "ipv4_mapped", None) is not None:
            ip = ip.ipv4_mapped
        return any(ip.version == net.version and ip in net for net in self.allow_networks)

    def allowlisted(self, host: str, addresses: Sequence[str]) -> bool:
        """True when a checked destination passed only through the operator's allowlist (not a public address)."""
        if host.lower().rstrip(".") in self.allow_hosts:
            return True
        return any(classify(a) is not None for a in addresses)

    def resolve(self, host: str, port: int) -> list[str]:
        """The addresses a call to ``host:port`` may connect to (in resolver order), or ``EgressRefusedError``.

        Every resolved address must pass: one refused address refuses the call (a name that resolves to both a
        public and a private address is how rebinding and split-horizon tricks look).
        """
        name = host.lower().rstrip(".")
        if not name:
            raise EgressRefusedError("the tool's URL has no host")
        addresses = list(self.resolver(name, port))
        if not addresses:
            raise EgressRefusedError("the tool's host name does not resolve")
        if name in self.allow_hosts:
            return addresses
        for address in addresses:
            why = classify(address)
            if why is not None and not self._allowed(address):
                raise EgressRefusedError(f"the tool's host resolves to {why}, which this host does not call")
        return addresses


@dataclass(frozen=True)
class Target:
    """A URL's destination as the guard checked it: connect only to ``addresses``, speak to ``host``."""

    url: str
    scheme: str
    host: str
    port: int
    addresses: list[str]


def check_url(policy: EgressPolicy, url: str, what: str) -> Target:
    """Parse an absolute http(s) URL and resolve its host through the guard (``what`` names it in errors)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TransportError(f"the {what}'s URL must be an absolute http or https URL")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise TransportError(f"the {what}'s URL has an invalid port") from exc
    host = parts.hostname.lower().rstrip(".")
    return Target(url, parts.scheme, host, port, policy.resolve(host, port))
