"""A support agent on the OpenAI Agents SDK. It knows nothing of the host it runs under: it reads an MCP server's
URL, a bearer token and an OpenAI-compatible base URL from the environment, as it would for any deployment.

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

from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents.mcp import MCPServerStreamableHttp
from openai import AsyncOpenAI

INSTRUCTIONS = "You are a support agent. Look the customer up, open one ticket for their issue, answer with it."


async def main() -> None:
    task = json.loads(os.environ.get("OPENWOP_TASK_INPUT") or sys.stdin.read())
    set_tracing_disabled(True)  # traces would carry the key to the SDK's default exporter
    model = OpenAIChatCompletionsModel(
        model=os.environ.get("SUPPORT_MODEL", "support-model"),
        openai_client=AsyncOpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"]),
    )
    tools = MCPServerStreamableHttp(
        params={
            "url": os.environ["OPENWOP_MCP_URL"],
            "headers": {"Authorization": f"Bearer {os.environ['OPENWOP_GATEWAY_TOKEN']}"},
            "timeout": 30,
        },
        client_session_timeout_seconds=30,
    )
    async with tools:
        agent = Agent(
            name="support",
            instructions=os.environ.get("SUPPORT_PROMPT", INSTRUCTIONS),
            mcp_servers=[tools],
            model=model,
        )
        result = await Runner.run(agent, json.dumps(task))
    print(result.final_output)


if __name__ == "__main__":
    asyncio.run(main())
