"""The locks (requirements/*.lock, docs/decisions/0156) are not stale against pyproject.toml, and they are what the
installs take.

Two checks, because either alone misses something: the digest line each lock carries (the sha256 of what it was
resolved from, recomputed here) fails on any edit of pyproject's dependencies, extras or Python range since the last
``make lock``, even one that leaves the old pins valid (a new extra on moto, a widened range); the range check names
what is wrong (a requirement with no pin, a pin outside its range) and holds even if someone edits a lock by hand and
rewrites its digest line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from infra import lockfiles, packaging

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "openwop-serverless"
RELOCK = "stale lock: run `make lock` (then `make install`) and commit requirements/"


def _pyproject_requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[Requirement]:
    """Every requirement pyproject.toml names (dependencies and every extra) but its references to itself."""
    inputs = lockfiles.dev_inputs(pyproject)
    specs = [*inputs["dependencies"], *(s for extra in inputs["optional-dependencies"].values() for s in extra)]
    return [r for r in map(Requirement, specs) if packaging.normalize(r.name) != PROJECT]


def _unmet(requirements: list[Requirement], pins: dict[str, lockfiles.Pin]) -> list[str]:
    """Each requirement that the pins do not satisfy: missing, or at a version outside its range."""
    problems = []
    for req in requirements:
        pin = pins.get(packaging.normalize(req.name))
        if pin is None:
            problems.append(f"{req}: not in the lock")
        elif not req.specifier.contains(pin.version, prereleases=True):
            problems.append(f"{req}: locked at {pin.version}")
    return problems


def test_each_lock_records_the_digest_of_what_it_is_resolved_from_now() -> None:
    assert lockfiles.recorded_digest(lockfiles.DEV_LOCK) == lockfiles.inputs_digest(lockfiles.dev_inputs()), RELOCK
    assert lockfiles.recorded_digest(packaging.RUNTIME_LOCK) == lockfiles.inputs_digest(lockfiles.runtime_inputs()), (
        RELOCK
    )
    # and the layer's input file is what pyproject says now (make lock writes it)
    assert lockfiles._lines(lockfiles.RUNTIME_IN) == packaging.layer_requirements(), RELOCK


def test_any_edit_of_the_dependency_sections_changes_the_digest(tmp_path: Path) -> None:
    text = (ROOT / "pyproject.toml").read_text()
    recorded = lockfiles.inputs_digest(lockfiles.dev_inputs())
    deps = text.index("dependencies = [")
    edits = {  # each on the first place it fits, so that the test outlives any one dependency
        "a new runtime requirement": text.replace("dependencies = [\n", 'dependencies = [\n  "attrs>=23",\n', 1),
        "a changed range": text[:deps] + re.sub(r">=(\d)", r">=0\1", text[deps:], count=1),
        "a new build requirement": text.replace("requires = [", 'requires = ["wheel", ', 1),
        "an extra on a requirement": re.sub(r'"([A-Za-z0-9_.-]+)\[', r'"\1[another,', text, count=1),
        "a new extra": text.replace(
            "[project.optional-dependencies]\n", '[project.optional-dependencies]\nx = ["six"]\n'
        ),
        "a new Python floor": re.sub(r'requires-python = "[^"]*"', 'requires-python = ">=3.12"', text, count=1),
    }
    for what, edited in edits.items():
        assert edited != text, what
        (tmp_path / "pyproject.toml").write_text(edited)
        assert lockfiles.inputs_digest(lockfiles.dev_inputs(tmp_path / "pyproject.toml")) != recorded, what
    # while a comment or an unrelated section does not
    (tmp_path / "pyproject.toml").write_text(text.replace("[tool.ruff]", "# lint\n[tool.ruff]"))
    assert lockfiles.inputs_digest(lockfiles.dev_inputs(tmp_path / "pyproject.toml")) == recorded


def test_every_requirement_pyproject_names_is_pinned_inside_its_range() -> None:
    dev = lockfiles.read_lock(lockfiles.DEV_LOCK)
    requirements = _pyproject_requirements()
    assert len(requirements) > 25
    assert _unmet(requirements, dev) == [], RELOCK
    # and what the Makefile installs beside them (the installer, the build backend) is pinned too, the backend inside
    # the range [build-system] requires
    assert _unmet([Requirement(r) for r in lockfiles._lines(lockfiles.DEV_IN)], dev) == [], RELOCK
    build = [Requirement(r) for r in lockfiles.dev_inputs()["build-system"]]
    assert build and _unmet(build, dev) == [], "requirements/dev.in must name [build-system] requires, then make lock"
    assert {"pip", "setuptools"} <= set(dev)
    # and the layer's lock pins every layer requirement inside its range
    runtime = lockfiles.read_lock(packaging.RUNTIME_LOCK)
    assert _unmet([Requirement(r) for r in packaging.layer_requirements()], runtime) == [], RELOCK


def test_the_range_check_names_a_missing_pin_and_one_outside_its_range() -> None:
    pins = {"pydantic": lockfiles.Pin("pydantic", "3.0.0", "", ("sha256:00",))}
    assert _unmet([Requirement("pydantic>=2.10,<3"), Requirement("msgspec>=0.19")], pins) == [
        "pydantic<3,>=2.10: locked at 3.0.0",
        "msgspec>=0.19: not in the lock",
    ]


def test_every_pin_is_exact_and_carries_the_hashes_of_its_files(tmp_path: Path) -> None:
    for lock in (lockfiles.DEV_LOCK, packaging.RUNTIME_LOCK, lockfiles.TOOLS_LOCK):
        pins = lockfiles.read_lock(lock)
        assert pins, lock
        for pin in pins.values():
            assert pin.hashes and all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in pin.hashes), (lock, pin.name)
    # a binary distribution carries a hash for each platform's wheel: Linux x86_64 and aarch64 alike install
    assert len(lockfiles.read_lock(lockfiles.DEV_LOCK)["pydantic-core"].hashes) > 20
    # and a line that is not name==version is refused, not skipped
    loose = tmp_path / "loose.lock"
    loose.write_text("pydantic>=2 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    with pytest.raises(ValueError, match="not pinned"):
        lockfiles.read_lock(loose)


def test_the_layer_ships_the_versions_the_tests_run_and_never_the_runtimes_sdk() -> None:
    dev = lockfiles.read_lock(lockfiles.DEV_LOCK)
    runtime = lockfiles.read_lock(packaging.RUNTIME_LOCK)
    assert {"aws-lambda-powertools", "pydantic-core", "msgspec", "mcp"} <= set(runtime)
    # Each distribution the layer ships is at the version dev.lock pins (runtime.lock is resolved under it)
    assert {n: p.version for n, p in runtime.items() if n not in dev or dev[n].version != p.version} == {}
    # The Lambda runtime's own boto3, botocore and s3transfer are never shipped (decision 0098: 32 MB); the tests run
    # the boto3 and botocore that pyproject's range admits, the range the deployed code is written against
    assert not set(runtime) & packaging.RUNTIME_PROVIDED
    sdk = [r for r in _pyproject_requirements() if packaging.normalize(r.name) in {"boto3", "botocore"}]
    assert len(sdk) == 2 and _unmet(sdk, dev) == []


def test_install_and_the_layer_take_the_locks_with_their_hashes() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("$(STAMP): pyproject.toml $(DEV_LOCK)\n", 1)[1].split("\n\n")[0]
    assert "$(UV) pip install --quiet --python $(PY) --require-hashes --compile-bytecode -r $(DEV_LOCK)" in recipe
    assert "$(UV) pip install --quiet --python $(PY) --no-deps --no-build-isolation --compile-bytecode -e ." in recipe
    # and where uv cannot install, pip installs the same lock with the same hashes
    assert "|| $(PY) -m pip install --quiet --require-hashes -r $(DEV_LOCK)" in recipe
    assert "|| $(PY) -m pip install --quiet --no-deps --no-build-isolation -e ." in recipe
    # and the installer is the locked uv, installed from its own lock with its hashes
    assert "UV := $(LOCK_TOOLS)/bin/uv" in makefile
    assert "$(LOCK_TOOLS)/bin/pip install --quiet --require-hashes -r requirements/tools.lock" in makefile
    assert "DEV_LOCK := requirements/dev.lock" in makefile
    assert "STAMP := .venv/.installed-$(shell cat pyproject.toml $(DEV_LOCK) | sha1sum" in makefile
    assert re.search(r"^lock: .*\n\t.*-m infra\.lockfiles ", makefile, re.M)
    # and the layer's pip is given the lock, hashes required, never a range from pyproject
    cmd = packaging.pip_layer_command(Path("site"))
    assert cmd[cmd.index("--requirement") + 1] == str(packaging.RUNTIME_LOCK) and "--require-hashes" in cmd
    assert cmd[cmd.index("--target") + 1] == "site" and "--platform" in cmd
    assert not set(cmd) & set(packaging.layer_requirements())
