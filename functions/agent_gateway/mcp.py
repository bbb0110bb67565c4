"""``POST G/mcp``: the MCP tool gateway (decision 0143, built by its own step; until then ``404 not_found``)."""

from __future__ import annotations

from shared.errors import NotFoundError
from shared.ports import Ports
from shared.services.gateway import GatewayRequest, GatewayResponse, GatewaySession


def handle(ports: Ports, session: GatewaySession, request: GatewayRequest) -> GatewayResponse:
    raise NotFoundError("No such resource.")
