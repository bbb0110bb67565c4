"""The examples' READMEs (``examples/*/README.md``), run exactly as written against ``openwop-serverless serve``: a
real framework agent (the OpenAI Agents SDK, PydanticAI), unchanged, recorded in five production sessions through the
gateways, a suite built from them, evaluated with ``eval run --exec`` (0 tool calls; a changed prompt regresses,
exit 1, at the differing pointer), and one session replayed with 0 model and 0 tool calls.

Every ``sh`` block runs in order in one bash (``-euo pipefail``) from the repository's root, with the README's
loopback model server on a free port; the printed lines are checked against what each block's comments say. Each
example has a test file of its own (``tests/integration/test_example_*.py``), so the suite's workers run them side by
side."""

from __future__ import annotations

import os
import re
import socket
import subprocess
from pathlib import Path

from tests.helpers import local_serve

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _script(example: str) -> str:
    text = (ROOT / "examples" / example / "README.md").read_text()
    return "\n".join(re.findall(r"```sh\n(.*?)```", text, re.S))


def _counts(lines: list[str]) -> list[list[int]]:
    """The ``{"count": N}`` answers of each line that prints hit counters, in order."""
    return [[int(n) for n in re.findall(r'\{"count": (\d+)\}', line)] for line in lines if '{"count"' in line]


def run_example_readme(tmp_path: Path, example: str) -> None:
    """Run ``examples/<example>/README.md`` as written and check what its comments say it prints."""
    # Given the host as make serve runs it, and the README's blocks in one shell
    with local_serve(tmp_path) as env:
        path = f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
        out = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", _script(example)],
            cwd=ROOT,
            env={**env, "PATH": path, "MODEL_PORT": str(_free_port()), "TMPDIR": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=900,
        )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.splitlines()

    # Then both versions register, and five production sessions complete through the gateways
    assert [line.rsplit(" ", 1)[1] for line in lines if line.startswith('{"agentId":"support"')] == ["201", "201"]
    assert sum(line.endswith("completed (support@1.0.0)") for line in lines) == 5, lines

    # A suite is built from them; the changed prompt regresses (exit 1) and the markdown says why
    assert "acme.evals.support@1.0.0" in lines
    assert "eval exit 1" in lines
    first = next(line for line in lines if "decided by" in line)
    assert "exit 1: decided by regression" in first
    assert "/title" in (tmp_path / "support-pr.md").read_text()  # the differing pointer, in the PR comment

    # No eval and no replay called a tool: the demo tool server saw the ten production calls only
    counts = _counts(lines)
    tools = [c[-1] for c in counts]
    assert tools == [10, 10, 10, 10], counts

    # The replay completed and called no model
    assert any(re.search(r" completed \(replay of tenant-a/r-", line) for line in lines), lines
    model_before, model_after = counts[-2][0], counts[-1][0]
    assert model_before == model_after > 0
