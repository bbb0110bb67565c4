"""The README's "Your own agent, in versions" section, run exactly as written against ``openwop-serverless serve``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

from tests.helpers import eventually

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_agent_section_runs_as_written(tmp_path) -> None:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Your own agent, in versions", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "MOTO_", "OPENWOP_", "EGRESS_")) and not k.endswith(("_TABLE", "_BUCKET"))}
    env["PYTHONPATH"] = str(ROOT)
    errors = (tmp_path / "serve.stderr").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "shared.local.cli", "serve", "--port", "0"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=errors, text=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True).start()
    try:
        eventually(lambda: any("Ctrl-C" in line for line in lines), timeout=60)
        exports = next(line for line in lines if line.startswith("export "))
        tour_env = dict(env)
        for pair in exports.split()[1:]:
            name, _, value = pair.partition("=")
            tour_env[name] = value
        out = subprocess.run([sys.executable, "-c", blocks[0]], cwd=tmp_path, env=tour_env, capture_output=True,
                             text=True, timeout=240)
        assert out.returncode == 0, out.stderr[-3000:]
        assert out.stdout.splitlines() == ["Support resolver", "completed", "completed", "refund True 0",
                                           "broken False 1", "regressed 0", "completed 0"], out.stdout
    finally:
        proc.send_signal(2)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
