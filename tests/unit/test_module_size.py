"""No module of ``shared`` or ``functions`` is over 600 lines (issue 23): a module that grows past it is split into
cohesive modules, as ``shared/local/persistence.py`` and ``shared/local/patches.py`` were."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 600
PACKAGES = ("shared", "functions")


def lines_of(path: Path) -> int:
    """A file's lines as ``wc -l`` counts them (a last line without its newline counts too)."""
    return len(path.read_bytes().splitlines())


def oversized(root: Path) -> dict[str, int]:
    """Every ``.py`` file under the packages of ``root`` with more than ``MAX_LINES`` lines, by its path."""
    return {
        str(p.relative_to(root)): n
        for package in PACKAGES
        for p in sorted((root / package).rglob("*.py"))
        if "__pycache__" not in p.parts and (n := lines_of(p)) > MAX_LINES
    }


def test_no_module_of_shared_or_functions_is_over_600_lines() -> None:
    # Given the repository's packages (the check reads the real tree: it holds the local stack's modules)
    assert (ROOT / "shared" / "local" / "persistence.py").is_file() and (ROOT / "functions" / "_common").is_dir()
    # When every module is counted, then none is over the limit
    assert oversized(ROOT) == {}


def test_the_check_finds_a_module_over_600_lines(tmp_path: Path) -> None:
    # Given a tree with a module of 601 lines, deep in a package, one of exactly 600, and an oversized non-module
    (tmp_path / "shared" / "local").mkdir(parents=True)
    (tmp_path / "functions").mkdir()
    (tmp_path / "shared" / "local" / "big.py").write_text("x = 1\n" * 600 + "y = 2")  # no newline at the end
    (tmp_path / "functions" / "handler.py").write_text("x = 1\n" * 600)
    (tmp_path / "shared" / "notes.txt").write_text("x\n" * 700)
    # When it is checked, then only the module over the limit is named, with its count
    assert oversized(tmp_path) == {"shared/local/big.py": 601}
