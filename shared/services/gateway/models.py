"""``POST G/v1/chat/completions``: the model gateway (decision 0143, built by its own step; until then ``404``)."""

from __future__ import annotations

from shared.errors import NotFoundError
from shared.ports import Ports
from shared.services.gateway import GatewayRequest, GatewayResponse, GatewaySession


def handle_chat(ports: Ports, session: GatewaySession, request: GatewayRequest) -> GatewayResponse:
    raise NotFoundError("No such resource.")
