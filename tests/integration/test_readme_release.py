"""The README's "From production to a gated release" section, run exactly as written against
``openwop-serverless serve``: its two blocks one after the other in one Python process, as a reader pastes them
(the second uses the first's names): the walk to a gated release, then the channel's rollback, the old version
serving unpinned runs again, and the channel's history."""

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
        # When every block of the walk runs as written, in order
        out = subprocess.run(
            [sys.executable, "-c", "\n".join(blocks)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    # Then every step prints what the README says it prints (the comment closing each print line)
    assert out.returncode == 0, out.stderr[-3000:]
    said = [
        line.rsplit("# ", 1)[1].strip() for block in blocks for line in block.splitlines() if line.startswith("print(")
    ]
    assert out.stdout.splitlines() == said, out.stdout
    assert said == [
        "demo.evals.production@1.0.0 2 tasks (2 added)",
        "['stable']",
        "201",
        "422 eval_gate_unmet",
        "201",
        "200 active ['stable']",
        "2.1.0",
        "200 1.0.0 2.1.0",
        "1.0.0",
        "['1.0.0', '2.1.0', '1.0.0']",
    ]
