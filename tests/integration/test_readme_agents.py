"""The README's "Your own agent, in versions" section, run exactly as written against ``openwop-serverless serve``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import local_serve

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_agent_section_runs_as_written(tmp_path) -> None:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Your own agent, in versions", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1
    with local_serve(tmp_path) as env:
        out = subprocess.run([sys.executable, "-c", blocks[0]], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines() == ["Support resolver", "completed", "completed", "refund True 0",
                                       "broken False 1", "regressed 0", "completed 0"], out.stdout
