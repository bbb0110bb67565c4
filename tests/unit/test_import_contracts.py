"""No import circles: the module graph of ``shared`` and ``functions`` (grimp's, the one import-linter checks, lazy
imports inside functions included) has no strongly connected component of more than one module, and import-linter's
engine contracts (pyproject.toml, run by ``make lint``) break when a circle or an upward import comes back."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
ENGINE_LAYERS = "engine layers: blocks, kernel, forkindex, workflowrun | evalrun, evalfork, runkinds"
ENGINE_ACYCLIC = "engine modules import each other without cycles"
LOCAL_ACYCLIC = "local modules import each other without cycles"
CLI_HTTP = "the CLI talks HTTP: no embedded AWS, AWS SDK, storage, wiring or services"
SERVICES = "shared.services"


def cycles(graph: grimp.ImportGraph) -> set[frozenset[str]]:
    """The graph's circles: each strongly connected component of more than one module (the modules each of which
    imports, directly or not, every other)."""
    found: set[frozenset[str]] = set()
    for module in graph.modules:
        loop = graph.find_upstream_modules(module) & graph.find_downstream_modules(module)
        if loop:
            found.add(frozenset(loop | {module}))
    return found


@cache
def _graph() -> grimp.ImportGraph:
    return grimp.build_graph("shared", "functions", cache_dir=None)


def test_cycles_finds_each_circle_and_nothing_else() -> None:
    graph = grimp.ImportGraph()
    for importer, imported in (
        ("p.a", "p.b"),
        ("p.b", "p.c"),
        ("p.c", "p.a"),
        ("p.d", "p.a"),
        ("p.e", "p.f"),
        ("p.f", "p.e"),
        ("p.g", "p.g"),
    ):
        graph.add_import(importer=importer, imported=imported)
    assert cycles(graph) == {frozenset({"p.a", "p.b", "p.c"}), frozenset({"p.e", "p.f"})}


def test_no_module_of_shared_or_functions_is_in_an_import_circle() -> None:
    """The whole graph (engine, services, storage, ports, handlers; a lazy import inside a function counts)."""
    graph = _graph()
    assert len([m for m in graph.modules if m.startswith(f"{SERVICES}.")]) > 20  # the graph holds the services
    # and the embedded AWS: the local state's modules and the moto patches' (lazy moto imports and all)
    assert {
        f"shared.local.{m}"
        for m in (
            "persistence",
            "datadir",
            "journal_records",
            "snapshots",
            "moto_data",
            "patches",
            "lambda_registry",
            "ddb_streams",
            "sfn_patches",
            "stack",
            "commands",
        )
    } <= graph.modules
    assert cycles(graph) == set()


def test_a_circle_through_a_lazy_import_is_found() -> None:
    """The check can fail: one planted import back up the services' layers (as a lazy import in a function would
    add) closes the circle agents -> deployments -> agent_versions -> agents."""
    graph = grimp.build_graph("shared", "functions", cache_dir=None)
    graph.add_import(importer=f"{SERVICES}.agent_versions", imported=f"{SERVICES}.agents")
    assert cycles(graph) == {frozenset({f"{SERVICES}.agent_versions", f"{SERVICES}.agents", f"{SERVICES}.deployments"})}


def test_lazy_imports_are_in_the_graph() -> None:
    """The imports inside ``agents.pin`` (the default: stable once deployed) and ``agents.workflow_pins`` (channel
    resolution) are edges like top-level ones."""
    lines = [
        d["line_contents"]
        for d in _graph().get_import_details(importer=f"{SERVICES}.agents", imported=f"{SERVICES}.deployments")
    ]
    assert sorted(lines) == [
        "from shared.services.deployments import default_version",
        "from shared.services.deployments import resolve_channel",
    ]


def test_the_kernel_imports_no_run_kind() -> None:
    """The kernel takes the run kinds in a map from its caller (``runkinds.RUN_KINDS``), never by import, and each
    entry is a real kind: the key ``kernel.run_kind`` gives, the kind's ``advance``."""
    from shared.engine import runkinds

    graph = _graph()
    kinds = {"shared.engine.workflowrun", "shared.engine.evalfork"}
    assert set(runkinds.RUN_KINDS) == {"workflow", "eval-fork"}
    assert runkinds.RUN_KINDS["workflow"] is __import__("shared.engine.workflowrun", fromlist=["advance"]).advance
    assert {"shared.engine.workflowrun", "shared.engine.evalfork"} <= graph.find_upstream_modules(
        "shared.engine.runkinds"
    )
    below = graph.find_upstream_modules("shared.engine.kernel")
    assert below & {*kinds, "shared.engine.evalrun", "shared.engine.forkindex", "shared.engine.runkinds"} == set()
    for name in kinds:
        assert callable(__import__(name, fromlist=["advance"]).advance)
    # and no task handler imports a kind only for its side effect: the Advance task's passes the map
    handler = (ROOT / "functions/tasks/advance_run/handler.py").read_text()
    assert "noqa: F401" not in handler and re.search(
        r"kernel\.advance\(\s*get_ports\(\),\s*run_id,\s*RUN_KINDS,", handler
    )


def _not_python(directory: str, names: list[str]) -> list[str]:
    return [n for n in names if n == "__pycache__" or not (n.endswith(".py") or (Path(directory) / n).is_dir())]


def _source_copy(tmp_path: Path) -> Path:
    """The packages and the import-linter configuration, copied (Python files only) to a fresh directory."""
    for package in ("shared", "functions"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=_not_python)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _lint_imports(where: Path) -> tuple[int, dict[str, str], str]:
    """Run ``lint-imports`` in ``where`` (it analyses the packages found there first): its exit status, each
    contract's verdict by name, and its output."""
    tool = Path(sys.executable).parent / "lint-imports"
    out = subprocess.run(
        [str(tool), "--no-cache"],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "400", "NO_COLOR": "1"},
    )
    verdicts = {}
    for line in out.stdout.splitlines():
        for verdict in ("KEPT", "BROKEN"):
            if line.endswith(f" {verdict}"):
                verdicts[line.removesuffix(f" {verdict}")] = verdict
    return out.returncode, verdicts, out.stdout


def test_the_copied_tree_keeps_every_contract(tmp_path: Path) -> None:
    """The control for the next test: the same copy, untouched, keeps every contract."""
    code, verdicts, output = _lint_imports(_source_copy(tmp_path))
    assert code == 0, output
    assert verdicts[ENGINE_LAYERS] == "KEPT" and verdicts[ENGINE_ACYCLIC] == "KEPT"
    assert verdicts[LOCAL_ACYCLIC] == "KEPT"


@pytest.mark.parametrize(
    ("module", "imports", "broken"),
    [
        # the circle as it was: the kernel's advance importing the eval fork kind (lazily, inside a function)
        ("shared/engine/kernel.py", "shared.engine.evalfork", {ENGINE_LAYERS, ENGINE_ACYCLIC}),
        # the other direction: the index of a fork calling back into the workflow kind
        ("shared/engine/forkindex.py", "shared.engine.workflowrun", {ENGINE_LAYERS, ENGINE_ACYCLIC}),
        # a building block reaching up into the kernel (which imports it)
        ("shared/engine/state.py", "shared.engine.kernel", {ENGINE_LAYERS, ENGINE_ACYCLIC}),
        # two kinds side by side, one importing the other: no circle, but not their layer's independence
        ("shared/engine/evalrun.py", "shared.engine.workflowrun", {ENGINE_LAYERS}),
        # the local state's data folder reaching back into the journal (which imports it)
        ("shared/local/datadir.py", "shared.local.persistence", {LOCAL_ACYCLIC}),
        # a moto patch area importing the module that applies every patch
        ("shared/local/lambda_registry.py", "shared.local.patches", {LOCAL_ACYCLIC}),
    ],
    ids=[
        "kernel-imports-a-kind",
        "forkindex-imports-a-kind",
        "block-imports-kernel",
        "kind-imports-sibling",
        "local-datadir-imports-journal",
        "local-patch-area-imports-patches",
    ],
)
def test_import_linter_breaks_when_a_circle_comes_back(
    tmp_path: Path, module: str, imports: str, broken: set[str]
) -> None:
    where = _source_copy(tmp_path)
    with (where / module).open("a") as f:
        f.write(f"\n\ndef _reintroduced():  # pragma: no cover\n    import {imports}\n\n    return {imports}\n")
    code, verdicts, output = _lint_imports(where)
    assert code == 1, output
    assert {name for name, v in verdicts.items() if v == "BROKEN"} == broken, output
    importer = module.removesuffix(".py").replace("/", ".")
    shown = f"{importer} -> {imports}"
    if broken == {LOCAL_ACYCLIC}:  # an acyclic_siblings contract alone names the import below its ancestor
        shown = f"- {importer.removeprefix('shared.local')} -> {imports.removeprefix('shared.local')} (1 import)"
    assert shown in output  # the copy's import, so the copy is what was analysed


@pytest.mark.parametrize(
    ("module", "imports"),
    [
        ("shared/cli/evalcli.py", "shared.local.stack"),  # the embedded AWS, lazily inside a command
        ("shared/cli/evalhost.py", "boto3"),  # an AWS SDK
        ("shared/cli/evalrequest.py", "shared.services.deployments"),  # a host service (as resolve_version did)
    ],
    ids=["cli-imports-local", "cli-imports-boto3", "cli-imports-a-service"],
)
def test_import_linter_breaks_when_the_cli_reaches_past_http(tmp_path: Path, module: str, imports: str) -> None:
    # Given a copy of the sources whose CLI module imports what the CLI contract forbids
    where = _source_copy(tmp_path)
    with (where / module).open("a") as f:
        f.write(f"\n\ndef _reached():  # pragma: no cover\n    import {imports}\n\n    return {imports}\n")
    # When import-linter runs on it
    code, verdicts, output = _lint_imports(where)
    # Then the CLI contract alone breaks, naming the import
    assert code == 1, output
    assert {name for name, v in verdicts.items() if v == "BROKEN"} == {CLI_HTTP}, output
    assert f"{module.removesuffix('.py').replace('/', '.')} -> {imports}" in output
