"""The README's "Register your tools, agent and workflow" section, run exactly as written against
``openwop-serverless serve``, with an HTTP tool server and an MCP server of the test's own on loopback (the
section's ``TOOLS_URL`` and ``MCP_URL``).

Every ``sh`` block runs in order in one bash (``-euo pipefail``), as a reader pastes them into one shell; every
registration prints the status its comment says, the items read back are what was registered, the pasted
workflow's run completes and its replay calls nothing; the one request the tool server receives is the one the
section's ``http`` block shows (its ``Host`` port and ``Idempotency-Key`` digits aside)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from shared.local.demo_mcp import DemoMcpServer
from shared.local.demo_tools import DemoToolServer
from tests.helpers import local_serve

ROOT = Path(__file__).resolve().parents[2]
HEADING = "Register your tools, agent and workflow"
KEY = re.compile(r"^owop-[0-9a-f]{40}$")


def _blocks() -> list[tuple[str, str]]:
    text = (ROOT / "README.md").read_text()
    section = text.split(f"## {HEADING}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(\w+)\n(.*?)```", section, re.S)


def _said_statuses(script: str) -> list[int]:
    """The status each printing command's comment says (``api ...`` and ``agent ...`` lines, in order)."""
    said = []
    for line in script.splitlines():
        if line.startswith(("api ", "agent ")):
            said.append(int(re.findall(r"\b(\d{3})\b", line.split("# ", 1)[1])[-1]))
    return said


def _documented_request(block: str) -> tuple[str, str, dict[str, str], str]:
    head, _, body = block.partition("\n\n")
    request_line, *header_lines = head.splitlines()
    method, path, _ = request_line.split(" ")
    headers = {name.lower(): value.strip() for name, _, value in (h.partition(":") for h in header_lines)}
    return method, path, headers, body.strip()


def test_the_readme_registration_section_runs_as_written(tmp_path) -> None:
    blocks = _blocks()
    assert [lang for lang, _ in blocks] == ["sh", "sh", "http", "sh", "sh", "sh"]
    script = "\n".join(code for lang, code in blocks if lang == "sh")
    tools, mcp = DemoToolServer(), DemoMcpServer(port=0)
    tools_url, mcp_url = tools.start(), mcp.start()
    try:
        with local_serve(tmp_path) as env:
            # When every block runs as written, in one shell, against the test's own tool servers
            out = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", script],
                cwd=tmp_path,
                env={**env, "TOOLS_URL": tools_url, "MCP_URL": mcp_url},
                capture_output=True,
                text=True,
                timeout=600,
            )
    finally:
        tools.stop()
        mcp.stop()
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.splitlines()
    answered = [line for line in lines if re.fullmatch(r"[\[{].* \d{3}", line)]
    rest = [line for line in lines if line not in answered]

    # Then every registration answers the status its comment says
    statuses = [int(line.rsplit(" ", 1)[1]) for line in answered]
    assert statuses == _said_statuses(script), out.stdout
    assert statuses == [201, 201, 200, 201, 201, 200, 201, 200, 200, 201, 201, 201, 201, 201, 201, 201]
    bodies = [json.loads(line.rsplit(" ", 1)[0]) for line in answered]
    (cred_min, cred_full, cred_read, tool_min, tool_full, tool_read, mcp_min, mcp_full, mcp_read) = bodies[:9]
    (hello_mock, hello_bedrock, hello_ollama, openai_cred, triage, support, workflow) = bodies[9:]

    # ... credentials are metadata only, never the secret
    assert cred_min["credentialRef"] == "desk-api" and cred_min["type"] == "bearer"
    assert cred_full["type"] == "header" and cred_full["description"] == "CRM API key"
    assert {k: cred_read[k] for k in ("credentialRef", "type", "description")} == {
        "credentialRef": "crm-key",
        "type": "header",
        "description": "CRM API key",
    }
    assert set(cred_read) == {"credentialRef", "type", "description", "createdAt", "updatedAt"}
    assert openai_cred["credentialRef"] == "openai"
    assert "crm-key-1" not in out.stdout and "desk-token-1" not in out.stdout and "sk-your-key" not in out.stdout

    # ... the HTTP tools' descriptors: the minimal POST tool is `write`, the full one as registered
    assert (tool_min["toolId"], tool_min["safetyTier"], tool_min["replayPolicy"]) == (
        "acme.crm:lookup",
        "write",
        "non-deterministic",
    )
    assert tool_read == tool_full
    assert tool_read["toolId"] == "acme.desk:ticket" and tool_read["source"] == "connector"
    assert (tool_read["safetyTier"], tool_read["replayPolicy"], tool_read["egress"]) == (
        "write",
        "idempotent",
        "safe-fetch",
    )
    assert tool_read["auth"] == {"credentialRef": True} and tool_read["title"] == "Open a ticket"
    assert tool_read["outputSchema"] == {"type": "object", "properties": {"ticketId": {"type": "string"}}}
    assert "url" not in json.dumps(tool_read) and "version" not in tool_read

    # ... the MCP server's tools listed, then classed as registered
    listed = ["mcp:acme-desk.create_ticket", "mcp:acme-desk.fail_always", "mcp:acme-desk.lookup_customer"]
    assert mcp_min["toolIds"] == listed and mcp_min["url"] == mcp_url and mcp_min["timeoutMs"] == 10000
    assert mcp_full["toolIds"] == listed and mcp_full["credentialRef"] == "crm-key" and mcp_full["timeoutMs"] == 5000
    assert mcp_min["negotiation"]["version"] == mcp_full["negotiation"]["version"] == "2026-07-28"
    assert (mcp_read["toolId"], mcp_read["source"], mcp_read["safetyTier"], mcp_read["replayPolicy"]) == (
        "mcp:acme-desk.lookup_customer",
        "mcp",
        "read",
        "deterministic",
    )

    # ... the agents, one per provider, the full one and the workflow's
    assert [(a["agentId"], a["model"]["provider"], a["model"]["model"]) for a in (hello_mock, hello_bedrock)] == [
        ("acme.hello-mock", "mock", "demo-model"),
        ("acme.hello-bedrock", "bedrock", "anthropic.claude-3-5-haiku-20241022-v1:0"),
    ]
    assert (hello_ollama["agentId"], hello_ollama["model"]) == (
        "acme.hello-ollama",
        {"provider": "openai", "model": "llama3.1"},
    )
    assert triage["model"] == {"provider": "openai", "model": "gpt-4o-mini"} and triage["maxTurns"] == 6
    assert triage["toolAllowlist"] == ["mcp:acme-desk.lookup_customer", "acme.desk:ticket"]
    assert triage["label"] == "Ticket triage" and triage["version"] == "1.0.0"
    assert (support["agentId"], support["toolAllowlist"], support["maxTurns"]) == (
        "acme.support",
        ["acme.desk:ticket"],
        8,
    )
    assert workflow == {"workflowId": "acme-support", "version": "1", "name": "Support"}

    # ... the run called the tool once and completed, its replay completed, the definition reads back
    assert rest == ["1", "completed", "event: run.started", "event: run.completed", "{'agentId': 'acme.support'}"]

    # And the tool server received exactly one request, the one the section shows (registering and the replay
    # sent none)
    assert len(tools.hits) == 1, tools.hits
    hit = tools.hits[0]
    method, path, headers, body = _documented_request(next(code for lang, code in blocks if lang == "http"))
    assert (hit.method, hit.path) == (method, path)
    assert set(hit.headers) == set(headers)
    assert hit.headers["host"] == tools_url.removeprefix("http://")
    assert KEY.fullmatch(hit.headers["idempotency-key"]) and KEY.fullmatch(headers["idempotency-key"])
    same = {k: v for k, v in headers.items() if k not in ("host", "idempotency-key")}
    assert {k: hit.headers[k] for k in same} == same
    assert hit.body == json.loads(body) and int(headers["content-length"]) == len(body.encode())
