"""The local host's first import of a handler (``shared.local.context.load_handler``) takes the packages with an
import cycle whole, under its lock: a handler that imports part of one lazily, inside a call, then never meets
another thread's half-done import of it (a 500 on a restarted host)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LOADED = """
import json, sys
from shared import manifest
from shared.local.context import CYCLIC_PACKAGES, load_handler

before = [p in sys.modules for p in CYCLIC_PACKAGES]
load_handler(manifest.function("deliver_webhooks"))  # imports Powertools' batch utilities only inside a call
print(json.dumps([list(CYCLIC_PACKAGES), before, [p in sys.modules for p in CYCLIC_PACKAGES]]))
"""


def test_a_handler_s_first_import_takes_the_cyclic_packages_whole():
    # Given a fresh interpreter (this suite's processes have imported everything already)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", LOADED], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    packages, before, after = json.loads(done.stdout.strip().splitlines()[-1])
    # When the webhook consumer's handler is loaded, Then Powertools' data classes were imported with it, whole
    assert packages == ["aws_lambda_powertools.utilities.data_classes"]
    assert before == [False] and after == [True]
