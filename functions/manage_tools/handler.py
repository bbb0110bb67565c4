"""Host extension: register and remove HTTP tools and MCP servers (tenant-scoped).

POST /host/openwop-serverless/tools (201 new or new version, 200 identical, 409 version_conflict);
DELETE /host/openwop-serverless/tools/{toolId}; POST|GET /host/openwop-serverless/mcp-servers (the host lists
the server's tools as an MCP client); DELETE /host/openwop-serverless/mcp-servers/{serverId}.
"""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.services import tools

app = api.build_resolver()
BASE = "/host/openwop-serverless"


@app.post(f"{BASE}/tools")
def register_tool() -> Response[str]:
    from shared.protocol.tools import ToolRegistration

    caller = api.caller(app)
    status, body = tools.register_tool(api.ports(), caller, api.parse(app, ToolRegistration))
    return api.reply(status, body)


@app.delete(f"{BASE}/tools/<tool_id>")
def delete_tool(tool_id: str) -> Response[str]:
    tools.delete_tool(api.ports(), api.caller(app), api.segment(tool_id))
    return api.empty(204)


@app.post(f"{BASE}/mcp-servers")
def register_mcp_server() -> Response[str]:
    from shared.protocol.tools import McpServerRegistration

    caller = api.caller(app)
    status, body = tools.register_mcp_server(api.ports(), caller, api.parse(app, McpServerRegistration))
    return api.reply(status, body)


@app.get(f"{BASE}/mcp-servers")
def list_mcp_servers() -> Response[str]:
    return api.reply(200, tools.list_mcp_servers(api.ports(), api.caller(app)))


@app.delete(f"{BASE}/mcp-servers/<server_id>")
def delete_mcp_server(server_id: str) -> Response[str]:
    tools.delete_mcp_server(api.ports(), api.caller(app), api.segment(server_id))
    return api.empty(204)


lambda_handler = api.make_handler(app)
