"""GET /workflows/{workflowId}: a seeded or registered workflow definition."""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.services import runs

app = api.build_resolver()


@app.get("/workflows/<workflow_id>")
def get_workflow(workflow_id: str) -> Response[str]:
    caller = api.caller(app)
    return api.reply(200, runs.get_workflow(api.ports(), caller, workflow_id))


lambda_handler = api.make_handler(app)
