"""Build the Lambda assets without Docker.

``python -m infra.packaging`` builds two directories that the CDK stack ships as-is:

- ``build/lambda/``: ``functions/`` and ``shared/`` (minus ``shared/local/``, tests and caches) plus byte code
  compiled ahead of time, so a cold start never compiles.
- ``build/layer/python/``: the runtime dependencies from pyproject.toml (boto3/botocore excluded: the Lambda runtime
  ships them), installed by pip for the Lambda platform (cp311, manylinux2014_aarch64, wheels only).

Byte code is written to ``__pycache__`` with *unchecked-hash* invalidation. Python ignores ``-b``-style legacy
``.pyc`` files while the ``.py`` source sits next to them, and CDK zips assets with every mtime set to 1980, which
would invalidate timestamp-based ``.pyc`` files; unchecked-hash files are used as they are.

The layer is rebuilt only when it is out of date: ``build/layer.stamp`` holds the sha256 of what it was built from
(the runtime requirements of pyproject.toml, the platform and the Python version), so ``make build`` and
``make synth`` need no network once the layer exists (``--force-layer`` rebuilds it anyway, e.g. to pick up a new
release within a version range). A rebuild installs into ``build/layer.new`` and replaces ``build/layer`` only once
complete: a failed or interrupted pip leaves the previous layer in place.

Synthesis never runs pip or copies sources: :func:`asset_dirs` only looks for the directories and falls back to an
empty placeholder (with a warning) when they have not been built.
"""

from __future__ import annotations

import argparse
import compileall
import hashlib
import json
import py_compile
import shutil
import subprocess
import sys
import tomllib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = ROOT / "build"
LAMBDA_DIR = BUILD_DIR / "lambda"
LAYER_DIR = BUILD_DIR / "layer"
LAYER_STAMP = BUILD_DIR / "layer.stamp"
PLACEHOLDER_DIR = BUILD_DIR / "placeholder"

SOURCE_PACKAGES = ("functions", "shared")
EXCLUDED_DIRS = frozenset({"__pycache__", "tests", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
# The embedded (moto) host is never deployed.
EXCLUDED_PATHS = frozenset({("shared", "local")})
EXCLUDED_SUFFIXES = (".pyc", ".pyo")
# Packages the Lambda Python runtime already provides.
RUNTIME_PROVIDED = frozenset({"boto3", "botocore"})
LAMBDA_PYTHON = (3, 11)
LAMBDA_PLATFORM = "manylinux2014_aarch64"


@dataclass(frozen=True)
class AssetDirs:
    """Directories for ``Code.from_asset``: the handler code and the dependencies layer."""

    code: Path
    layer: Path
    code_built: bool
    layer_built: bool


class AssetsNotBuiltError(RuntimeError):
    """Raised when a synthesis that requires built assets finds none."""


def _ignore(directory: str, names: list[str]) -> set[str]:
    rel = Path(directory).relative_to(ROOT).parts
    return {n for n in names if n in EXCLUDED_DIRS or n.endswith(EXCLUDED_SUFFIXES) or (*rel, n) in EXCLUDED_PATHS}


def _compile(directory: Path) -> None:
    if sys.version_info[:2] != LAMBDA_PYTHON:
        warnings.warn(
            f"byte code not compiled: this is Python {sys.version_info.major}.{sys.version_info.minor}, "
            f"the Lambda runtime is {LAMBDA_PYTHON[0]}.{LAMBDA_PYTHON[1]}",
            stacklevel=2,
        )
        return
    ok = compileall.compile_dir(
        directory,
        quiet=1,
        force=True,
        workers=1,
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    if not ok:
        raise RuntimeError(f"compileall failed under {directory}")


def build_lambda(target: Path = LAMBDA_DIR) -> Path:
    """Copy the deployable sources into ``target`` (replacing it) and compile them."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for package in SOURCE_PACKAGES:
        src = ROOT / package
        if src.is_dir():
            shutil.copytree(src, target / package, ignore=_ignore)
        else:
            (target / package).mkdir()
    _compile(target)
    return target


def layer_requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The runtime dependencies of pyproject.toml that the Lambda runtime does not already provide."""
    deps: list[str] = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    keep: list[str] = []
    for spec in deps:
        name = spec.split(";")[0].strip()
        for sep in ("[", "=", "<", ">", "!", "~", " "):
            name = name.split(sep)[0]
        if name.lower().replace("_", "-") not in RUNTIME_PROVIDED:
            keep.append(spec)
    return keep


def layer_fingerprint(requirements: list[str] | None = None) -> str:
    """sha256 of what the layer is built from: the requirement specs, the platform and the Python version."""
    spec = {"requirements": sorted(layer_requirements() if requirements is None else requirements),
            "platform": LAMBDA_PLATFORM, "python": list(LAMBDA_PYTHON)}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def layer_up_to_date(target: Path = LAYER_DIR, stamp: Path = LAYER_STAMP) -> bool:
    """The layer exists and its stamp matches what it would be built from now."""
    return (target / "python").is_dir() and stamp.is_file() and stamp.read_text().strip() == layer_fingerprint()


def _pip_layer(site: Path) -> None:
    major, minor = LAMBDA_PYTHON
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",
        "--platform",
        LAMBDA_PLATFORM,
        "--implementation",
        "cp",
        "--python-version",
        f"{major}.{minor}",
        "--only-binary=:all:",
        "--target",
        str(site),
        *layer_requirements(),
    ]
    subprocess.run(cmd, check=True)


def build_layer(target: Path = LAYER_DIR, stamp: Path = LAYER_STAMP, *,
                install: Callable[[Path], None] = _pip_layer) -> Path:
    """Install the layer for the Lambda platform into ``target/python``, replacing ``target`` only once the new
    one is complete (built in ``<target>.new``); then write the stamp."""
    staging = target.with_name(target.name + ".new")
    retired = target.with_name(target.name + ".old")
    for leftover in (staging, retired):
        if leftover.exists():
            shutil.rmtree(leftover)
    site = staging / "python"
    site.mkdir(parents=True)
    try:
        install(site)
        # Console scripts are useless in a layer (their shebang names this machine's interpreter).
        shutil.rmtree(site / "bin", ignore_errors=True)
        _compile(site)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    stamp.unlink(missing_ok=True)  # a swap cut short leaves no stamp: the next build rebuilds
    if target.exists():
        target.rename(retired)
    staging.rename(target)
    stamp.write_text(layer_fingerprint() + "\n")
    shutil.rmtree(retired, ignore_errors=True)
    return target


def asset_dirs(*, require_built: bool = False) -> AssetDirs:
    """Where the stack takes its Lambda code and layer from. Never builds anything."""
    code_built = LAMBDA_DIR.is_dir()
    layer_built = (LAYER_DIR / "python").is_dir()
    missing = [str(p.relative_to(ROOT)) for p, ok in ((LAMBDA_DIR, code_built), (LAYER_DIR, layer_built)) if not ok]
    if missing and require_built:
        raise AssetsNotBuiltError(f"not built: {', '.join(missing)}; run `python -m infra.packaging` first")
    if missing:
        print(
            f"WARNING: {', '.join(missing)} not built; synthesizing with empty placeholder assets. "
            "Run `python -m infra.packaging` before deploying.",
            file=sys.stderr,
        )
    code = LAMBDA_DIR if code_built else _placeholder("lambda")
    layer = LAYER_DIR if layer_built else _placeholder("layer")
    return AssetDirs(code=code, layer=layer, code_built=code_built, layer_built=layer_built)


def _placeholder(name: str) -> Path:
    path = PLACEHOLDER_DIR / name
    if name == "layer":
        (path / "python").mkdir(parents=True, exist_ok=True)
        # A layer asset must not be an empty zip.
        (path / "python" / "PLACEHOLDER").write_text("dependencies not built: run `python -m infra.packaging`\n")
    else:
        path.mkdir(parents=True, exist_ok=True)
        (path / "PLACEHOLDER").write_text("code not built: run `python -m infra.packaging`\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.packaging", description=__doc__.splitlines()[0])
    parser.add_argument("--skip-layer", action="store_true", help="build only build/lambda (no pip)")
    parser.add_argument("--force-layer", action="store_true", help="rebuild the layer even when up to date")
    args = parser.parse_args(argv)
    print(f"building {build_lambda().relative_to(ROOT)}")
    if args.skip_layer:
        return 0
    if layer_up_to_date() and not args.force_layer:
        print(f"{LAYER_DIR.relative_to(ROOT)} is up to date (requirements sha256 {layer_fingerprint()[:12]}): "
              "not rebuilt, no network used")
    else:
        print(f"building {build_layer().relative_to(ROOT)} (pip: needs the package index)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
