"""GET /host/openwop-serverless/workflows (host extension): the caller's own registered workflows.

Query: limit (1..100, default 50), cursor (the nextCursor of the previous page). 200 {workflows: [{workflowId,
name, version, registeredAt}], nextCursor?}, ordered by workflowId. Host fixtures are not listed.
"""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.services import workflows

app = api.build_resolver()


@app.get("/host/openwop-serverless/workflows")
def list_workflows() -> Response[str]:
    caller = api.caller(app)
    return api.reply(200, workflows.list_workflows(api.ports(), caller.tenant, api.query(app)))


lambda_handler = api.make_handler(app)
