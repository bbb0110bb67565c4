"""Issue 39: the key layout exists once, in ``shared/storage/``. Above it (the services, the engine, the CLI, the
Lambda handlers) code speaks in repositories: it never calls the host store's item methods (on ``ports.host``,
``ports.signing``, or any attribute chain ending in ``.host`` / ``.signing``) and never spells a host-table partition
prefix (a string, or an f-string's head, like ``"TOOL#"`` or ``f"WORKFLOW#{tenant}"``).

The run's aux-key prefixes the engine and services pass to the run store (``CHILD#``, ``IDEM#``, ``EFFECT#``,
``SUITELINK#``, ``MCALL#`` ...) are named in ``shared/keys.py``, outside the checked folders, so the allow-list below
is empty: a literal spelled in a checked module is a finding.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("shared/services", "shared/engine", "shared/cli", "functions")
HOST_METHODS = frozenset(
    {
        "get_item",
        "get_item_and_run",
        "put_item",
        "query",
        "query_page",
        "delete_item",
        "put_effect",
        "delete_prefix",
        "counter_read",
        "add_counter",
    }
)
HOST_STORES = frozenset({"host", "signing"})
KEY_PREFIX = re.compile(r"^[A-Z][A-Z_]*#")
# Literals allowed in checked modules, by (path, literal), each with why. Empty: every run aux-key prefix is a
# constant of shared/keys.py.
ALLOWED: frozenset[tuple[str, str]] = frozenset()


def _literal_heads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every plain string constant and every f-string's leading text (not its later parts)."""
    inner: set[int] = set()
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            inner.update(id(v) for v in node.values)
            head = node.values[0] if node.values else None
            if isinstance(head, ast.Constant) and isinstance(head.value, str):
                out.append((node.lineno, head.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inner:
            out.append((node.lineno, node.value))
    return out


def violations(root: Path) -> list[str]:
    """Every host-store call and host-key literal in the checked folders under ``root``, as ``path:line: what``."""
    found: list[str] = []
    for folder in CHECKED:
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            tree = ast.parse(path.read_text("utf-8"), filename=rel)
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in HOST_METHODS
                    and isinstance(node.func.value, ast.Attribute)
                    and node.func.value.attr in HOST_STORES
                ):
                    found.append(f"{rel}:{node.lineno}: calls .{node.func.value.attr}.{node.func.attr}()")
            for line, text in _literal_heads(tree):
                if KEY_PREFIX.match(text) and (rel, text) not in ALLOWED:
                    found.append(f"{rel}:{line}: spells the key prefix {text!r}")
    return sorted(found)


def test_nothing_above_storage_calls_the_host_store_or_spells_a_key_prefix() -> None:
    # Given the real tree, then no checked module reaches past its repositories
    assert (ROOT / "shared" / "storage" / "host.py").is_file() and (ROOT / "functions").is_dir()
    assert violations(ROOT) == []


def test_the_check_finds_each_kind_of_violation(tmp_path: Path) -> None:
    # Given a tree whose checked folders hold one module of each kind of violation, and storage doing the same
    for folder in CHECKED:
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "shared" / "storage").mkdir()
    (tmp_path / "shared/services/calls.py").write_text(
        "def f(ports, ctx):\n"
        "    ports.host.get_item('a', 'b')\n"
        "    ctx.ports.signing.put_item('a', 'b', {})\n"
        "    ctx.ports.host.put_effect('a', 'b', {}, run_id='r', expires_at=0)\n"
        "    ports.tools.get_tool('t', 'x')\n"  # a repository: fine
        "    ports.runs.query_aux('r', 'X')\n"  # the run store: fine
    )
    (tmp_path / "shared/engine/literals.py").write_text(
        "A = 'WORKFLOW#'\ndef f(tenant):\n    return f'AGENT_V#{tenant}', f'{tenant}#NOT#', 'lower#', 'Mixed#', 'RUN'\n"
    )
    (tmp_path / "shared/cli/query.py").write_text("def f(store):\n    return store.host.query('TOOL#t')\n")
    (tmp_path / "functions/handler.py").write_text('"""Docs may say SUITE#<tenant> mid-sentence."""\nX = "SUITE#*"\n')
    (tmp_path / "shared/storage/repo.py").write_text("def f(host):\n    return host.host.get_item('TOOL#t', 'x')\n")
    # When the check runs over it
    found = violations(tmp_path)
    # Then it names each call on a host store and each key-prefix literal (an f-string by its head), nothing else
    assert found == [
        "functions/handler.py:2: spells the key prefix 'SUITE#*'",
        "shared/cli/query.py:2: calls .host.query()",
        "shared/cli/query.py:2: spells the key prefix 'TOOL#t'",
        "shared/engine/literals.py:1: spells the key prefix 'WORKFLOW#'",
        "shared/engine/literals.py:3: spells the key prefix 'AGENT_V#'",
        "shared/services/calls.py:2: calls .host.get_item()",
        "shared/services/calls.py:3: calls .signing.put_item()",
        "shared/services/calls.py:4: calls .host.put_effect()",
    ]
