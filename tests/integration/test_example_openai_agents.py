"""``examples/openai-agents/README.md`` runs as written (``tests.example_readme``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.example_readme import run_example_readme


@pytest.mark.timeout(1200)  # a framework's start, five sessions, two evals and a replay: ~80 s alone, more under load
def test_the_openai_agents_example_runs_as_its_readme_says(tmp_path: Path) -> None:
    run_example_readme(tmp_path, "openai-agents")
