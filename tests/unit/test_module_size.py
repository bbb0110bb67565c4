"""No module of ``shared``, ``functions`` or ``infra`` is over 600 lines *as ``ruff format`` writes it* (issues 23
and 39): the check formats a copy of the tree first, so a module cannot meet the limit by packing lines to the
margin; a module that grows past it is split along its subjects."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 600
PACKAGES = ("shared", "functions", "infra")


def lines_of(path: Path) -> int:
    """A file's lines as ``wc -l`` counts them (a last line without its newline counts too)."""
    return len(path.read_bytes().splitlines())


def formatted_copy(root: Path, into: Path) -> Path:
    """The packages of ``root`` copied under ``into`` and run through ``ruff format`` (the project's settings)."""
    present = [package for package in PACKAGES if (root / package).is_dir()]
    for package in present:
        shutil.copytree(root / package, into / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", into / "pyproject.toml")
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--quiet", *present], cwd=into, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return into


def oversized(root: Path) -> dict[str, int]:
    """Every ``.py`` file under the packages of ``root`` with more than ``MAX_LINES`` lines, by its path."""
    return {
        str(p.relative_to(root)): n
        for package in PACKAGES
        for p in sorted((root / package).rglob("*.py"))
        if "__pycache__" not in p.parts and (n := lines_of(p)) > MAX_LINES
    }


def test_no_module_is_over_600_lines_as_formatted(tmp_path: Path) -> None:
    # Given the repository's packages, formatted (the check reads the real tree: it holds the local stack's modules)
    assert (ROOT / "shared" / "local" / "persistence.py").is_file() and (ROOT / "functions" / "_common").is_dir()
    tree = formatted_copy(ROOT, tmp_path)
    # When every module is counted, then none is over the limit
    assert oversized(tree) == {}


def test_the_check_finds_a_module_over_600_lines(tmp_path: Path) -> None:
    # Given a tree with a module of 601 lines, deep in a package, one of exactly 600, and an oversized non-module
    (tmp_path / "shared" / "local").mkdir(parents=True)
    (tmp_path / "functions").mkdir()
    (tmp_path / "shared" / "local" / "big.py").write_text("x = 1\n" * 600 + "y = 2")  # no newline at the end
    (tmp_path / "functions" / "handler.py").write_text("x = 1\n" * 600)
    (tmp_path / "shared" / "notes.txt").write_text("x\n" * 700)
    # When it is checked, then only the module over the limit is named, with its count
    assert oversized(tmp_path) == {"shared/local/big.py": 601}


def test_a_module_packed_under_the_limit_is_counted_as_formatted(tmp_path: Path) -> None:
    # Given a module of 400 lines, each a call packed onto one line that ruff format splits into several
    src = tmp_path / "src"
    (src / "shared").mkdir(parents=True)
    call = "value = compute(" + ", ".join(f"argument_number_{i}=item_{i}" for i in range(8)) + ")\n"
    (src / "shared" / "packed.py").write_text(call * 400)
    assert oversized(src) == {}
    # When the tree is formatted first, then the module is over the limit
    out = tmp_path / "out"
    out.mkdir()
    assert oversized(formatted_copy(src, out))["shared/packed.py"] > MAX_LINES
