"""The README's "From production to a gated release" section, run exactly as written against
``openwop-serverless serve``. Its second block (rollback, then an unpinned run on the restored version) waits for
unpinned runs to resolve the stable channel; it is not run here yet."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import local_serve, readme_python_blocks


def test_the_readme_release_section_runs_as_written(tmp_path) -> None:
    blocks = readme_python_blocks("From production to a gated release")
    assert len(blocks) == 2
    with local_serve(tmp_path) as env:
        # Given the shell `make install` leaves: the venv's commands on PATH
        env = {**env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"}
        # When the walk runs as written
        out = subprocess.run([sys.executable, "-c", blocks[0]], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=400)
    # Then every step prints what the README says it prints
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines() == [
        "demo.evals.production@1.0.0 2 tasks (2 added)", "['stable']", "201", "422 eval_gate_unmet", "201",
        "200 active ['stable']", "2.1.0"], out.stdout
