"""The README's "Your own agent, in versions" section, run exactly as written against ``openwop-serverless serve``."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import local_serve, readme_python_blocks


def test_the_readme_agent_section_runs_as_written(tmp_path) -> None:
    blocks = readme_python_blocks("Your own agent, in versions")
    assert len(blocks) == 1
    with local_serve(tmp_path) as env:
        out = subprocess.run(
            [sys.executable, "-c", blocks[0]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
        )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines() == [
        "Support resolver",
        "completed",
        "completed",
        "refund True 0",
        "broken False 1",
        "regressed 0",
        "completed 0",
    ], out.stdout
