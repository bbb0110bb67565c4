"""The conformance seams profile (api/seams-v2.yaml), served only with the setting ``OPENWOP_CONFORMANCE_SEAMS``.

POST /conformance/seams/sample/event-log/seed (seedEra2EventLog, 201 {runId});
POST /conformance/seams/sample/effect-seams/fire (fireEffectSeam, 201 {runId});
POST /conformance/seams/sample/mcp/invoke (host-sample-test-seams.md §23: one MCP exchange, 200 {runId, ...});
GET /host/durability/kill (RFC 0158's durability hook: its probe) and POST (its duplicate-delivery exercise).
Without the setting every one answers 404 not_found, as any path this host does not serve.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from functions._common import api
from functions._common.resolver import Response
from shared.services import seams

app = api.build_resolver()


def _serve(model: Any, action: Callable[[Any, Any, Any], Any]) -> Response[str]:
    """A seam: refused as a path never served before the caller and the body are read when the setting is off."""
    ports = api.ports()
    seams.require_enabled(ports)
    caller = api.caller(app)
    created = action(ports, caller, api.parse(app, model))
    return api.reply(created.status, created.body)


@app.post("/conformance/seams/sample/event-log/seed")
def seed_event_log() -> Response[str]:
    from shared.protocol.seams_bodies import SeedEventLog

    return _serve(SeedEventLog, seams.seed_event_log)


@app.post("/conformance/seams/sample/effect-seams/fire")
def fire_effect_seam() -> Response[str]:
    from shared.protocol.seams_bodies import FireEffectSeam

    return _serve(FireEffectSeam, seams.fire_effect_seam)


@app.post("/conformance/seams/sample/mcp/invoke")
def mcp_invoke() -> Response[str]:
    from shared.protocol.seams_bodies import McpInvoke

    return _serve(McpInvoke, seams.mcp_invoke)


@app.get("/host/durability/kill")
def durability_probe() -> Response[str]:
    ports = api.ports()
    seams.require_enabled(ports)
    api.caller(app)
    return api.reply(200, seams.durability_probe(ports))


@app.post("/host/durability/kill")
def durability_exercise() -> Response[str]:
    from shared.protocol.seams_bodies import DurabilityKill

    return _serve(DurabilityKill, seams.durability_exercise)


lambda_handler = api.make_handler(app)
