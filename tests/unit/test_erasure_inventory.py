"""Issue 37 item 2: every kind of stored object is declared with how a run's erasure reaches it.

The declared inventory is ``shared.storage.lineage.FAMILIES``. The key families the code really uses are found in the
source, not listed by hand: in ``shared/keys.py`` and every module of ``shared/storage/``, each string literal (or an
f-string's leading text) that starts with an upper-case key prefix (``"CHILD#"``, ``"RUN#FACTS"``,
``f"WIDGET#{tenant}"``), and each module-level string constant named like a key (``*_PK``, ``*_SK``, ``*_PREFIX``,
``PK``, ``SK``, ``PREFIX``) whose value is upper case (``"RUN"``, ``"APIKEYID"``); in those modules and in
``shared/engine`` and ``shared/services`` (which spell S3 keys, never table keys: ``test_storage_boundary``), every
f-string that starts with one key segment and a placeholder (``f"runs/{run_id}/..."``: ``"runs/"``). A new kind with no
entry fails the test.
"""

from __future__ import annotations

import ast
import re
import shutil
from functools import cache
from pathlib import Path

from shared.manifest import resources as manifest
from shared.storage.lineage import FAMILIES

ROOT = Path(__file__).resolve().parents[2]
TABLE_KEY = re.compile(r"^[A-Z][A-Z0-9_]*#[A-Z0-9_#]*")
KEY_NAME = re.compile(r"^(?:\w+_)?(?:PK|SK|PREFIX)$")
KEY_VALUE = re.compile(r"^[A-Z][A-Z0-9_#]*$")
OBJECT_KEY = re.compile(r"^[a-z][a-z0-9-]*/$")
TABLE_KEY_SOURCES = ("shared/keys.py", "shared/storage")
OBJECT_KEY_SOURCES = (*TABLE_KEY_SOURCES, "shared/engine", "shared/services")
# Keys that are attributes of a run-keyed table, not spelled prefixes: declared, never found in the source.
ATTRIBUTE_KEYS = {(manifest.EVENTS, "runId"), (manifest.TOOL_CALLS, "runId"), (manifest.IDEMPOTENCY, "id")}


def _modules(root: Path, sources: tuple[str, ...]) -> list[Path]:
    return sorted(p for s in sources for p in ([root / s] if s.endswith(".py") else (root / s).rglob("*.py")))


def _literal_heads(tree: ast.AST) -> tuple[list[str], list[str]]:
    """Every plain string constant, and every f-string's leading text when a placeholder follows it."""
    inner: set[int] = set()
    heads: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            inner.update(id(v) for v in node.values)
            head = node.values[0] if node.values else None
            if isinstance(head, ast.Constant) and isinstance(head.value, str) and len(node.values) > 1:
                heads.append(head.value)
    plain = [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in inner
    ]
    return plain, heads


def _named_constants(tree: ast.Module) -> list[str]:
    return [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        and any(isinstance(t, ast.Name) and KEY_NAME.match(t.id) for t in node.targets)
        and KEY_VALUE.match(node.value.value)
    ]


def used_families(root: Path) -> dict[str, set[str]]:
    """Key family -> the modules (relative paths) that spell it."""
    found: dict[str, set[str]] = {}
    for path in _modules(root, OBJECT_KEY_SOURCES):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text("utf-8"), filename=rel)
        table_keys = rel.startswith(TABLE_KEY_SOURCES)
        plain, heads = _literal_heads(tree)
        for text in plain + heads if table_keys else []:
            if m := TABLE_KEY.match(text):
                found.setdefault(m.group(0), set()).add(rel)
        for text in heads:
            if OBJECT_KEY.match(text):
                found.setdefault(text, set()).add(rel)
        for value in _named_constants(tree) if table_keys else []:
            found.setdefault(value, set()).add(rel)
    return found


@cache
def _used_here() -> dict[str, set[str]]:
    return used_families(ROOT)


def unlisted(root: Path) -> list[str]:
    declared = {f.key for f in FAMILIES}
    used = _used_here() if root == ROOT else used_families(root)
    return sorted(f"{key} (in {', '.join(sorted(where))})" for key, where in used.items() if key not in declared)


def test_every_key_family_the_code_uses_is_declared_with_how_erasure_reaches_it() -> None:
    # Given the real tree (the discovery finds the families erasure is known to reach, so it is looking)
    used = _used_here()
    assert {"CHILD#", "IDEM#", "HOSTITEM#", "SUITELINK#", "LEDGER#", "RUN", "runs/", "derived/"} <= set(used)
    # Then every one of them has an entry in the inventory
    assert unlisted(ROOT) == []


def test_the_inventory_has_no_stale_or_doubled_entry_and_covers_every_table_and_bucket() -> None:
    # Given the inventory and the families the code uses
    used = set(_used_here())
    pairs = [(f.table, f.key) for f in FAMILIES]
    # Then each entry is one (table, key), spelled by the code (or a key attribute of a run-keyed table)
    assert len(pairs) == len(set(pairs))
    assert [p for p in pairs if p[1] not in used and p not in ATTRIBUTE_KEYS] == []
    # and every table and bucket of the manifest is declared
    assert {t.key for t in manifest.TABLES} | {b.key for b in manifest.BUCKETS} == {f.table for f in FAMILIES}
    # and every entry says why
    assert all(f.why for f in FAMILIES)


def test_a_new_key_family_without_an_entry_fails_the_check(tmp_path: Path) -> None:
    # Given a copy of the tree where storage spells three new kinds: a constant, an f-string's head, an object key
    for source in OBJECT_KEY_SOURCES:
        src, dst = ROOT / source, tmp_path / source
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copy if src.is_file() else shutil.copytree)(src, dst)
    with (tmp_path / "shared/storage/suites.py").open("a") as f:
        f.write(
            '\nNOTE_PREFIX = "NOTE#"\nREVIEW_SK = "REVIEW"\n\n\ndef _k(t):\n    return f"WIDGET#{t}", f"notes/{t}"\n'
        )
    # When the check runs over it
    found = unlisted(tmp_path)
    # Then it names each of them, and nothing else
    assert found == [
        "NOTE# (in shared/storage/suites.py)",
        "REVIEW (in shared/storage/suites.py)",
        "WIDGET# (in shared/storage/suites.py)",
        "notes/ (in shared/storage/suites.py)",
    ]
