"""GET /tools and GET /tools/{toolId}: the tool catalog (RFC 0078), tools the caller's tenant may invoke."""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.services import tools

app = api.build_resolver()


@app.get("/tools")
def list_tools() -> Response[str]:
    caller = api.caller(app)
    return api.reply(200, tools.list_tools(api.ports(), caller))


@app.get("/tools/<tool_id>")
def get_tool(tool_id: str) -> Response[str]:
    caller = api.caller(app)
    return api.reply(200, tools.get_tool(api.ports(), caller, api.segment(tool_id)))


lambda_handler = api.make_handler(app)
