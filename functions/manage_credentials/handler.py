"""Host extension: tool credentials, write-only (Secrets Manager holds the material; reads return metadata).

PUT /host/openwop-serverless/credentials/{credentialRef} (201 new, 200 replaced); GET one or the list
(metadata only: never a secret); DELETE (the secret is deleted at once, without a recovery window).
"""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.services import tools

app = api.build_resolver()
BASE = "/host/openwop-serverless/credentials"


@app.put(f"{BASE}/<ref>")
def put_credential(ref: str) -> Response[str]:
    from shared.protocol.tools import CredentialPut

    caller = api.caller(app)
    status, body = tools.put_credential(api.ports(), caller, api.segment(ref), api.parse(app, CredentialPut))
    return api.reply(status, body)


@app.get(BASE)
def list_credentials() -> Response[str]:
    return api.reply(200, tools.list_credentials(api.ports(), api.caller(app)))


@app.get(f"{BASE}/<ref>")
def get_credential(ref: str) -> Response[str]:
    return api.reply(200, tools.get_credential(api.ports(), api.caller(app), api.segment(ref)))


@app.delete(f"{BASE}/<ref>")
def delete_credential(ref: str) -> Response[str]:
    tools.delete_credential(api.ports(), api.caller(app), api.segment(ref))
    return api.empty(204)


lambda_handler = api.make_handler(app)
