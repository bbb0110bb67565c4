"""DELETE /host/openwop-serverless/workflows/{workflowId} (host extension): remove the caller's registration.

204 when removed (every version); runs already created keep the definition they pinned. 404 not_found, the same
bytes, for an unknown or another tenant's id; 409 version_conflict for a host fixture's id.
"""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.services import workflows

app = api.build_resolver()


@app.delete("/host/openwop-serverless/workflows/<workflow_id>")
def delete_workflow(workflow_id: str) -> Response[str]:
    caller = api.caller(app)
    workflows.delete_workflow(api.ports(), caller.tenant, workflow_id)
    return api.empty(204)


lambda_handler = api.make_handler(app)
