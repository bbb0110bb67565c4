"""The conformance seams profile (api/seams-v2.yaml), served only with the setting ``OPENWOP_CONFORMANCE_SEAMS``.

POST /conformance/seams/sample/event-log/seed (seedEra2EventLog, 201 {runId});
POST /conformance/seams/sample/effect-seams/fire (fireEffectSeam, 201 {runId});
GET /host/durability/kill (RFC 0158's durability hook: its probe) and POST (its duplicate-delivery exercise).
Without the setting every one answers 404 not_found, as any path this host does not serve.
"""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.services import seams

app = api.build_resolver()


@app.post("/conformance/seams/sample/event-log/seed")
def seed_event_log() -> Response[str]:
    from shared.protocol.seams_bodies import SeedEventLog

    ports = api.ports()
    seams.require_enabled(ports)  # before the caller and the body: disabled, it answers as a path never served
    caller = api.caller(app)
    created = seams.seed_event_log(ports, caller, api.parse(app, SeedEventLog))
    return api.reply(created.status, created.body)


@app.post("/conformance/seams/sample/effect-seams/fire")
def fire_effect_seam() -> Response[str]:
    from shared.protocol.seams_bodies import FireEffectSeam

    ports = api.ports()
    seams.require_enabled(ports)
    caller = api.caller(app)
    created = seams.fire_effect_seam(ports, caller, api.parse(app, FireEffectSeam))
    return api.reply(created.status, created.body)


@app.get("/host/durability/kill")
def durability_probe() -> Response[str]:
    ports = api.ports()
    seams.require_enabled(ports)
    api.caller(app)
    return api.reply(200, seams.durability_probe(ports))


@app.post("/host/durability/kill")
def durability_exercise() -> Response[str]:
    from shared.protocol.seams_bodies import DurabilityKill

    ports = api.ports()
    seams.require_enabled(ports)
    caller = api.caller(app)
    created = seams.durability_exercise(ports, caller, api.parse(app, DurabilityKill))
    return api.reply(created.status, created.body)


lambda_handler = api.make_handler(app)
