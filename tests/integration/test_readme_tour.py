"""The README's tour, run exactly as written against ``openwop-serverless serve`` (the ``make serve`` command).

The test starts the console script's ``serve`` on a free port, takes the ``export ...`` line it prints as the
tour's environment, then runs every ``sh`` block of the README's tour section with bash (``-euo pipefail``) and
every ``python`` block with this interpreter, and checks what they print.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import local_serve

ROOT = Path(__file__).resolve().parents[2]


def _tour_blocks() -> list[tuple[str, str]]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## A two-minute tour", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(sh|python)\n(.*?)```", section, re.S)


def test_the_readme_tour_runs_as_written(tmp_path) -> None:
    blocks = _tour_blocks()
    assert [lang for lang, _ in blocks] == ["sh", "python", "sh"]
    with local_serve(tmp_path) as tour_env:
        assert {"OPENWOP_BASE_URL", "OPENWOP_API_KEY", "DEMO_TOOLS_URL"} <= set(tour_env)

        # The shell tour: real tool calls, then a replay that calls nothing
        sh = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", blocks[0][1]],
            cwd=tmp_path,
            env=tour_env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert sh.returncode == 0, sh.stderr[-3000:]
        out = sh.stdout
        assert "['2.0']" in out
        assert "mcp:demo.lookup_customer mcp read" in out and "demo.desk:ticket connector write" in out
        assert "event: run.completed" in out
        hits = [json.loads(line)["count"] for line in out.splitlines() if line.startswith('{"count"')]
        assert hits == [2, 2], out
        assert out.rstrip().splitlines()[-1] == "completed"

        # The Python tour, with the official client
        py = subprocess.run(
            [sys.executable, "-c", blocks[1][1]],
            cwd=tmp_path,
            env=tour_env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert py.returncode == 0, py.stderr[-3000:]
        printed = py.stdout.splitlines()
        assert printed[0] == "completed"
        assert printed[1].startswith("completed ")
        assert "scoreDelta=0.333" in printed[2]
        assert printed[3] == "failed"

        # The CLI tour, with the console script on PATH (the virtualenv activated)
        cli_env = {**tour_env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{tour_env.get('PATH', '')}"}
        cli = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", blocks[2][1]],
            cwd=tmp_path,
            env=cli_env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert cli.returncode == 0, cli.stdout[-3000:] + cli.stderr[-3000:]
        rows = [line for line in cli.stdout.splitlines() if line.startswith("│")]
        assert [r.split("│")[1].strip() for r in rows] == ["shared-a", "shared-b", "candidate-only"]
        assert [r.split("│")[-2].strip() for r in rows] == ["unchanged", "unchanged", "unpaired"]
        assert "scoreDelta 0.333 [95% 0.000, 0.000]  paired verdict unchanged (2 paired tasks)" in cli.stdout
        assert cli.stdout.rstrip().splitlines()[-1] == "verdict: unchanged (exit 0)"
        assert "tasks" in cli.stderr or "completed" in cli.stderr  # progress lines (not a terminal)
        junit = (tmp_path / "eval-junit.xml").read_text()
        assert junit.count("<testcase ") == 3 and "<failure" not in junit
        print(cli.stdout)
