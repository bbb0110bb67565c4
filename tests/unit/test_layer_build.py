"""The dependencies layer is rebuilt only when out of date, and a rebuild never removes the built layer before the
new one is complete. pip is replaced by an installer that writes a file (no network, no package index). The same
steps that make the real layer small and single-copy (removing distributions by their RECORD, sourceless byte code)
are checked on small trees; tests/infra/test_layer.py builds the real one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infra import packaging


def _installer(version: str):
    def install(site: Path) -> None:
        (site / "dep.txt").write_text(f"VERSION = {version!r}\n")

    return install


def test_a_built_layer_is_up_to_date_until_its_requirements_change(tmp_path: Path) -> None:
    target, stamp = tmp_path / "layer", tmp_path / "layer.stamp"
    # Given no layer: it is not up to date
    assert not packaging.layer_up_to_date(target, stamp)
    # When it is built
    packaging.build_layer(target, stamp, install=_installer("1"))
    # Then it is, and its stamp is the fingerprint of the runtime lock's pins for the Lambda platform
    assert packaging.layer_up_to_date(target, stamp)
    assert stamp.read_text().strip() == packaging.layer_fingerprint()
    assert (target / "python" / "dep.txt").read_text() == "VERSION = '1'\n"
    # and another requirement set (a changed pyproject) would not match it
    assert packaging.layer_fingerprint(["pydantic==1.0"]) != packaging.layer_fingerprint()
    stamp.write_text(packaging.layer_fingerprint(["pydantic==1.0"]))
    assert not packaging.layer_up_to_date(target, stamp)


def test_the_layer_is_built_from_the_lock_and_rebuilt_when_the_lock_changes(tmp_path: Path) -> None:
    # Given the layer's lock: its requirement lines are exact pins with hashes, and they are what the stamp covers
    lines = packaging.locked_requirements()
    assert lines and all(re.match(r"^[a-z0-9-]+==\S+ .*--hash=sha256:[0-9a-f]{64}$", line) for line in lines)
    assert packaging.layer_fingerprint(lines) == packaging.layer_fingerprint()
    target, stamp = tmp_path / "layer", tmp_path / "layer.stamp"
    packaging.build_layer(target, stamp, install=_installer("1"))
    assert packaging.layer_up_to_date(target, stamp)
    # When `make lock` moves one pin (another version, other hashes)
    text = packaging.RUNTIME_LOCK.read_text()
    pin = re.search(r"^msgspec==(\S+) ", text, re.M)
    assert pin is not None
    moved = tmp_path / "runtime.lock"
    moved.write_text(text.replace(f"msgspec=={pin.group(1)} ", "msgspec==0.19.0 ", 1))
    # Then the stamp no longer matches: the next build installs the new lock
    assert packaging.layer_fingerprint(packaging.locked_requirements(moved)) != packaging.layer_fingerprint()
    # and pip is given that lock with its hashes, for the Lambda platform, never pyproject's ranges
    cmd = packaging.pip_layer_command(tmp_path / "site", moved)
    assert cmd[cmd.index("--requirement") + 1] == str(moved) and "--require-hashes" in cmd
    assert cmd[cmd.index("--platform") + 1] == packaging.LAMBDA_PLATFORM and "--only-binary=:all:" in cmd


def test_a_failed_rebuild_keeps_the_previous_layer(tmp_path: Path) -> None:
    target, stamp = tmp_path / "layer", tmp_path / "layer.stamp"
    packaging.build_layer(target, stamp, install=_installer("1"))

    def broken(site: Path) -> None:
        (site / "half.txt").write_text("x = 1\n")
        raise OSError("the package index is unreachable")

    # When a rebuild fails half-way (pip without network)
    with pytest.raises(OSError):
        packaging.build_layer(target, stamp, install=broken)
    # Then the previous layer and its stamp are untouched, and no staging directory is left
    assert sorted(p.name for p in (target / "python").iterdir() if p.suffix == ".txt") == ["dep.txt"]
    assert packaging.layer_up_to_date(target, stamp)
    assert not (tmp_path / "layer.new").exists() and not (tmp_path / "layer.old").exists()
    # and a successful rebuild replaces it whole
    packaging.build_layer(target, stamp, install=_installer("2"))
    assert (target / "python" / "dep.txt").read_text() == "VERSION = '2'\n"
    assert not (target / "python" / "half.txt").exists()


def _fake_dist(site: Path, name: str, version: str, files: dict[str, str]) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n")
    for rel, text in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    rows = [f"{rel},sha256=x,1" for rel in files] + [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")


def test_runtime_provided_and_excluded_distributions_leave_the_layer_whole(tmp_path: Path) -> None:
    # Given a layer site where a dependency pulled in botocore (as aws-xray-sdk did) beside a kept distribution
    site = tmp_path / "python"
    _fake_dist(site, "botocore", "1.44.8", {"botocore/__init__.py": "", "botocore/data/s3.json": "{}"})
    _fake_dist(site, "uvicorn", "0.55.0", {"uvicorn/__init__.py": ""})
    _fake_dist(site, "jmespath", "1.1.0", {"jmespath/__init__.py": "", "outside.txt": ""})
    (tmp_path / "elsewhere.txt").write_text("not the layer's")
    # When the runtime-provided and excluded distributions are removed
    removed = packaging.remove_distributions(site, packaging.RUNTIME_PROVIDED | packaging.LAYER_EXCLUDED)
    # Then exactly those are gone, files and directories, and the listing names only what is left
    assert sorted(removed) == ["botocore", "uvicorn"]
    assert not (site / "botocore").exists() and not (site / "uvicorn").exists()
    assert packaging.layer_distributions(site) == [("jmespath", "1.1.0")]
    assert (site / "jmespath" / "__init__.py").exists() and (tmp_path / "elsewhere.txt").exists()
    # and the runtime's own botocore is never asked for by the layer's requirements
    assert (
        not {
            packaging.normalize(r.split(";")[0].split("[")[0].split(">")[0].split("=")[0].split("<")[0])
            for r in packaging.layer_requirements()
        }
        & packaging.RUNTIME_PROVIDED
    )


def test_a_sourceless_layer_imports_from_byte_code_alone(tmp_path: Path) -> None:
    import subprocess
    import sys

    # Given a package compiled sourceless (here with this interpreter; the build uses the runtime's Python)
    site = tmp_path / "python"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("from pkg.mod import VALUE\n")
    (site / "pkg" / "mod.py").write_text("VALUE = 'compiled'\n")
    assert packaging._compile(site, sourceless=True, interpreter=sys.executable)
    # Then only byte code is left, beside where the sources were
    assert sorted(p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file()) == [
        "pkg/__init__.pyc",
        "pkg/mod.pyc",
    ]
    # and it imports
    out = subprocess.run(
        [sys.executable, "-c", "import pkg; print(pkg.VALUE)"],
        env={"PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "compiled"
