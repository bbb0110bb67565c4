"""POST /host/openwop-serverless/workflows (host extension): register a workflow definition for the caller's tenant.

Body: a WorkflowDefinition (the official schema, closed). 201 {workflowId, version, name} for a new (workflowId,
version), which becomes the version new runs use; 200 with the same body for the identical document again; 409
version_conflict for another document under the same workflowId and version, or a host fixture's id; 400
validation_error for a definition this host refuses; 422 capability_required for settings.compensation.
"""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.services import workflows

app = api.build_resolver()


@app.post("/host/openwop-serverless/workflows")
def register_workflow() -> Response[str]:
    caller = api.caller(app)
    status, body = workflows.register(api.ports(), caller.tenant, api.json_body(app))
    return api.reply(status, body)


lambda_handler = api.make_handler(app)
