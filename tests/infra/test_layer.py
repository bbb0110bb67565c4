"""The dependencies layer as deployed: its lock (requirements/runtime.lock) installs with its hashes for the Lambda
runtime's Python on arm64 (cp313, manylinux2014_aarch64, wheels only), exactly at its pins, and the built layer holds one copy of each distribution, none the runtime
already ships, within 40 MB unzipped. Both ask the package index (network to it exists in CI); the build is the
real one (``infra.packaging.build_layer``, pip), into a temporary directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infra import packaging
from infra.lockfiles import read_lock
from infra.runtimes import LAMBDA_PYTHON

pytestmark = pytest.mark.infra


def test_the_layer_lock_resolves_for_the_lambda_python_on_arm64(tmp_path: Path) -> None:
    # Given pip's resolution of the layer's lock for the Lambda platform, hashes required (a dry run: nothing installed)
    report = tmp_path / "report.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--disable-pip-version-check",
            "--report",
            str(report),
            *packaging.pip_platform_args(),
            "--require-hashes",
            "--requirement",
            str(packaging.RUNTIME_LOCK),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    resolved = {packaging.normalize(i["metadata"]["name"]): i for i in json.loads(report.read_text())["install"]}
    # Then it resolves, to exactly the lock's pins: every one of them and nothing else, each at its version
    pins = {name: pin.version for name, pin in read_lock(packaging.RUNTIME_LOCK).items()}
    assert {name: item["metadata"]["version"] for name, item in resolved.items()} == pins
    # and to wheels for that Python and platform only
    assert packaging.pip_platform_args()[:6] == [
        "--platform",
        "manylinux2014_aarch64",
        "--implementation",
        "cp",
        "--python-version",
        f"{LAMBDA_PYTHON[0]}.{LAMBDA_PYTHON[1]}",
    ]
    assert LAMBDA_PYTHON == (3, 13)
    wheels = [i["download_info"]["url"].rsplit("/", 1)[-1] for i in resolved.values()]
    assert wheels and all(w.endswith(".whl") for w in wheels)
    for wheel in wheels:  # pure Python, abi3, or built for cp313 on aarch64
        tags = wheel[:-4].split("-")[-3:]
        assert tags[1] in ("none", "abi3", "cp313"), wheel
        assert tags[2] == "any" or "aarch64" in tags[2], wheel
    # and the X-Ray SDK (which pulled in a second botocore) is gone, and nothing the runtime ships is asked for
    assert "aws-xray-sdk" not in resolved
    assert not set(resolved) & packaging.RUNTIME_PROVIDED
    assert {"aws-lambda-powertools", "pydantic-core", "msgspec", "mcp"} <= set(resolved)


def test_the_built_layer_holds_one_copy_of_each_distribution_within_40_mb(tmp_path: Path) -> None:
    # Given the layer built as `make build` builds it (pip for the Lambda platform, exclusions, byte code)
    target = packaging.build_layer(tmp_path / "layer", tmp_path / "layer.stamp")
    site = target / "python"
    listing = packaging.layer_distributions(site)
    names = [name for name, _version in listing]
    # Then each distribution is there once, none of them one the Lambda runtime ships or no deployed code imports
    assert len(names) == len(set(names)) and len(names) > 20
    assert not set(names) & (packaging.RUNTIME_PROVIDED | packaging.LAYER_EXCLUDED)
    assert "aws-xray-sdk" not in names and not (site / "botocore").exists()
    # and they are the lock's pins at its versions, less the excluded ones: the layer ships what the lock says
    pins = read_lock(packaging.RUNTIME_LOCK)
    assert dict(listing) == {n: pin.version for n, pin in pins.items() if n not in packaging.LAYER_EXCLUDED}
    # and no package directory is provided twice (a vendored copy under another distribution's name)
    tops = [p.name for p in site.iterdir() if p.is_dir() and not p.name.endswith((".dist-info", ".data"))]
    assert len(tops) == len(set(tops))
    # and the whole layer is at most 40 MB unzipped (it was 89 MB with botocore; docs/decisions/deploy-runtime-*)
    size = packaging.tree_bytes(target)
    assert 10_000_000 < size <= packaging.LAYER_MAX_BYTES == 40_000_000
    # and with the runtime's Python at hand (pyenv's python3.13 on this machine kind), it is byte code only
    if packaging.lambda_interpreter() is not None:
        assert not list(site.rglob("*.py")) and list(site.rglob("*.pyc"))
    print(f"layer: {len(names)} distributions, {size / 1e6:.1f} MB unzipped")
