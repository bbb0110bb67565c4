"""What every example under ``examples/`` keeps to; each README itself runs in ``test_example_*.py``."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_example_names_only_urls_and_a_key_from_the_environment() -> None:
    """The agents' code names no host type: it imports its framework and reads the environment, nothing of ours."""
    for agent in (ROOT / "examples").glob("*/agent.py"):
        code = agent.read_text()
        assert "shared" not in re.findall(r"^(?:from|import) (\w+)", code, re.M), agent
        assert "openwop" not in code.lower().replace("openwop_mcp_url", "").replace(
            "openwop_gateway_token", ""
        ).replace("openwop_task_input", ""), agent
        assert json.dumps(sorted(set(re.findall(r'environ(?:\.get)?\[?\(?"(\w+)"', code)))) != "[]", agent
