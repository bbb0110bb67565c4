"""A support agent on PydanticAI. It knows nothing of the host it runs under: it reads an MCP server's URL, a
bearer token and an OpenAI-compatible base URL from the environment, as it would for any deployment.

    OPENWOP_MCP_URL, OPENWOP_GATEWAY_TOKEN   the MCP server (Streamable HTTP) and its bearer token
    OPENAI_BASE_URL, OPENAI_API_KEY          the model endpoint (chat completions) and its key
    OPENWOP_TASK_INPUT                       the task, as JSON (else stdin)
    SUPPORT_PROMPT                           the instructions (a default below)

It prints its final answer on stdout.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

INSTRUCTIONS = "You are a support agent. Look the customer up, open one ticket for their issue, answer with it."


async def main() -> None:
    task = json.loads(os.environ.get("OPENWOP_TASK_INPUT") or sys.stdin.read())
    model = OpenAIChatModel(
        os.environ.get("SUPPORT_MODEL", "support-model"),
        provider=OpenAIProvider(base_url=os.environ["OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"]),
    )
    tools = MCPToolset(
        os.environ["OPENWOP_MCP_URL"],
        headers={"Authorization": f"Bearer {os.environ['OPENWOP_GATEWAY_TOKEN']}"},
    )
    agent = Agent(model, instructions=os.environ.get("SUPPORT_PROMPT", INSTRUCTIONS), toolsets=[tools])
    async with agent:
        result = await agent.run(json.dumps(task))
    print(result.output)


if __name__ == "__main__":
    asyncio.run(main())
