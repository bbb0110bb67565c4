"""Build the Lambda assets without Docker.

``python -m infra.packaging`` builds two directories that the CDK stack ships as-is:

- ``build/lambda/``: ``functions/`` and ``shared/`` (minus ``shared/local/``, ``shared/cli/``, tests and caches) plus byte code
  compiled ahead of time for the Lambda runtime's Python, so a cold start never compiles.
- ``build/layer/python/``: the runtime dependencies at the versions and hashes ``requirements/runtime.lock`` pins
  (``make lock``, ``infra/lockfiles.py``), installed by pip (``--require-hashes``) for the Lambda platform (cp313,
  manylinux2014_aarch64, wheels only: ``infra/runtimes.py`` names the runtime), less what the runtime already ships (boto3, botocore, s3transfer: a second botocore would be 32 MB of dead weight) and less the
  distributions no deployed module imports (``LAYER_EXCLUDED``). The layer is *sourceless*: each module is its
  byte code (``module.pyc`` in place of ``module.py``), which halves its size; third-party tracebacks keep file
  and line but not the source text. ``--list`` prints its distributions and size.

Byte code needs an interpreter of the runtime's version (``python3.13``): this one when it is that version, else
``$OPENWOP_LAMBDA_PYTHON``, ``python3.13`` on ``PATH`` or a pyenv install. Without one, the assets are built from
sources only (with a warning): the functions then compile on every cold start. Code byte code goes to
``__pycache__`` with *unchecked-hash* invalidation: Python ignores ``-b``-style legacy ``.pyc`` files while the
``.py`` source sits next to them, and CDK zips assets with every mtime set to 1980, which would invalidate
timestamp-based ``.pyc`` files; unchecked-hash files are used as they are.

The layer is rebuilt only when it is out of date: ``build/layer.stamp`` holds the sha256 of what it was built from
(the pinned lines of runtime.lock, the platform, the Python version, the exclusions and whether byte code was
compiled), so ``make build`` and ``make synth`` need no network once the layer exists (``--force-layer`` rebuilds
it anyway; a new release within a version range reaches it only through ``make lock``). A rebuild installs into
``build/layer.new`` and replaces ``build/layer`` only once complete: a failed or interrupted pip leaves the previous
layer in place.

Synthesis never runs pip or copies sources: :func:`asset_dirs` only looks for the directories and falls back to an
empty placeholder (with a warning) when they have not been built.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from infra.runtimes import LAMBDA_PYTHON

ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = ROOT / "build"
LAMBDA_DIR = BUILD_DIR / "lambda"
LAYER_DIR = BUILD_DIR / "layer"
LAYER_STAMP = BUILD_DIR / "layer.stamp"
PLACEHOLDER_DIR = BUILD_DIR / "placeholder"
RUNTIME_LOCK = ROOT / "requirements" / "runtime.lock"

SOURCE_PACKAGES = ("functions", "shared")
EXCLUDED_DIRS = frozenset({"__pycache__", "tests", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
# The embedded (moto) host and the command line are never deployed.
EXCLUDED_PATHS = frozenset({("shared", "local"), ("shared", "cli")})
EXCLUDED_SUFFIXES = (".pyc", ".pyo")
# Distributions the Lambda Python runtime already provides: never in the layer, even when a dependency asks for one.
RUNTIME_PROVIDED = frozenset({"boto3", "botocore", "s3transfer"})
# Distributions pip installs that no deployed module imports: the MCP SDK's server runner and its CLI (the host is
# an MCP client; ``mcp.client`` imports ``mcp.server`` modules, but none of them imports these).
LAYER_EXCLUDED = frozenset({"uvicorn", "click"})
LAMBDA_PLATFORM = "manylinux2014_aarch64"
LAYER_MAX_BYTES = 40_000_000  # unzipped (40 MB); the whole function (code + layers) may be 250 MB


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


def lambda_interpreter() -> str | None:
    """A Python of the Lambda runtime's version to compile byte code with, or None (see the module docstring)."""
    major, minor = LAMBDA_PYTHON
    if sys.version_info[:2] == LAMBDA_PYTHON:
        return sys.executable
    named = os.environ.get("OPENWOP_LAMBDA_PYTHON") or shutil.which(f"python{major}.{minor}")
    candidates = [named] if named else []
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    candidates += sorted(
        glob.glob(str(pyenv / "versions" / f"{major}.{minor}.*" / "bin" / f"python{major}.{minor}")), reverse=True
    )
    for candidate in candidates:
        out = subprocess.run(
            [candidate, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True, check=False
        )
        if out.returncode == 0 and out.stdout.strip() == str((major, minor)):
            return candidate
    return None


def _compile(directory: Path, *, sourceless: bool = False, interpreter: str | None = None) -> bool:
    """Compile ``directory`` for the Lambda runtime's Python (unchecked-hash). ``sourceless``: legacy ``.pyc`` beside
    each module, whose ``.py`` is then removed. False (with a warning) when no such interpreter is found."""
    interpreter = interpreter or lambda_interpreter()
    if interpreter is None:
        warnings.warn(
            f"byte code not compiled: no Python {LAMBDA_PYTHON[0]}.{LAMBDA_PYTHON[1]} found (the Lambda runtime's); "
            "set OPENWOP_LAMBDA_PYTHON to one",
            stacklevel=2,
        )
        return False
    cmd = [
        interpreter,
        "-m",
        "compileall",
        "-q",
        "-f",
        "-j",
        "1",
        "--invalidation-mode",
        "unchecked-hash",
        *(["-b"] if sourceless else []),
        str(directory),
    ]
    # a module that does not compile (a py2-only test file in a distribution) keeps its source; the rest compiles
    subprocess.run(cmd, check=False, capture_output=True)
    if sourceless:
        for source in directory.rglob("*.py"):
            if source.with_suffix(".pyc").is_file():
                source.unlink()
    elif not any(directory.rglob("*.pyc")):
        raise RuntimeError(f"compileall wrote no byte code under {directory}")
    return True


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


def code_fingerprint(code_dir: Path) -> str:
    """A short content hash of a code asset directory (relative paths and bytes): the default build id."""
    digest = hashlib.sha256()
    for path in sorted(p for p in code_dir.rglob("*") if p.is_file()):
        digest.update(path.relative_to(code_dir).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def normalize(name: str) -> str:
    """A distribution name as PEP 503 compares it: ``Typing_Extensions`` -> ``typing-extensions``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def layer_requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The runtime dependencies of pyproject.toml that the Lambda runtime does not already provide."""
    deps: list[str] = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    keep: list[str] = []
    for spec in deps:
        name = re.split(r"[\[=<>!~; ]", spec.strip(), maxsplit=1)[0]
        if normalize(name) not in RUNTIME_PROVIDED:
            keep.append(spec)
    return keep


def locked_requirements(lock: Path = RUNTIME_LOCK) -> list[str]:
    """The requirement lines of a lock (``name==version [; marker] --hash=sha256:... ...``), each joined from its
    continuation lines, comments dropped."""
    joined = re.sub(r"\\\n", " ", lock.read_text())
    lines = (line.split(" #", 1)[0] if not line.startswith("#") else "" for line in joined.splitlines())
    return [" ".join(line.split()) for line in lines if line.strip()]


def pip_platform_args() -> list[str]:
    """pip's options that select wheels for the Lambda platform, not this machine's."""
    major, minor = LAMBDA_PYTHON
    return [
        "--platform",
        LAMBDA_PLATFORM,
        "--implementation",
        "cp",
        "--python-version",
        f"{major}.{minor}",
        "--only-binary=:all:",
    ]


def layer_fingerprint(requirements: list[str] | None = None, *, compiled: bool | None = None) -> str:
    """sha256 of what the layer is built from: the locked requirement lines (runtime.lock's, by default), the platform,
    the Python version, the exclusions and whether byte code is compiled (by default: whether an interpreter for it is
    found now)."""
    spec = {
        "requirements": sorted(locked_requirements() if requirements is None else requirements),
        "platform": LAMBDA_PLATFORM,
        "python": list(LAMBDA_PYTHON),
        "excluded": sorted(RUNTIME_PROVIDED | LAYER_EXCLUDED),
        "compiled": lambda_interpreter() is not None if compiled is None else compiled,
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def layer_up_to_date(target: Path = LAYER_DIR, stamp: Path = LAYER_STAMP) -> bool:
    """The layer exists and its stamp matches what it would be built from now."""
    return (target / "python").is_dir() and stamp.is_file() and stamp.read_text().strip() == layer_fingerprint()


def pip_layer_command(site: Path, lock: Path = RUNTIME_LOCK) -> list[str]:
    """pip installing ``lock`` (exact versions, hashes required) for the Lambda platform into ``site``."""
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",
        *pip_platform_args(),
        "--require-hashes",
        "--target",
        str(site),
        "--requirement",
        str(lock),
    ]


def _pip_layer(site: Path) -> None:
    subprocess.run(pip_layer_command(site), check=True)


def layer_distributions(site: Path) -> list[tuple[str, str]]:
    """The distributions installed in ``site`` (its ``*.dist-info`` directories): (normalized name, version), sorted.
    A name listed twice would be two copies of one distribution."""
    found: list[tuple[str, str]] = []
    for info in site.glob("*.dist-info"):
        meta = {
            k.strip(): v.strip()
            for k, _, v in (
                line.partition(":")
                for line in (info / "METADATA").read_text(encoding="utf-8", errors="replace").splitlines()[:20]
            )
            if v
        }
        found.append((normalize(meta.get("Name", info.name.split("-")[0])), meta.get("Version", "")))
    return sorted(found)


def tree_bytes(path: Path) -> int:
    """The unzipped size of everything under ``path`` (what Lambda's 250 MB limit counts)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def remove_distributions(site: Path, names: Iterable[str]) -> list[str]:
    """Uninstall the named distributions from ``site`` by their RECORD (pip cannot uninstall from a ``--target``);
    returns the names removed. Files outside ``site`` are never touched."""
    wanted = {normalize(n) for n in names}
    removed: list[str] = []
    for info in sorted(site.glob("*.dist-info")):
        name, _version = info.name[: -len(".dist-info")].rsplit("-", 1)
        if normalize(name) not in wanted:
            continue
        record = info / "RECORD"
        paths = [line.split(",")[0] for line in record.read_text().splitlines()] if record.is_file() else []
        for rel in paths:
            target = (site / rel).resolve()
            if target.is_relative_to(site.resolve()) and target.is_file():
                target.unlink()
        shutil.rmtree(info, ignore_errors=True)
        removed.append(normalize(name))
    for directory in sorted((d for d in site.rglob("*") if d.is_dir()), key=lambda d: len(d.parts), reverse=True):
        if not any(directory.iterdir()):
            directory.rmdir()
    return removed


def build_layer(
    target: Path = LAYER_DIR,
    stamp: Path = LAYER_STAMP,
    *,
    install: Callable[[Path], None] = _pip_layer,
    compile_bytecode: bool = True,
) -> Path:
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
        remove_distributions(site, RUNTIME_PROVIDED | LAYER_EXCLUDED)
        # Console scripts are useless in a layer (their shebang names this machine's interpreter).
        shutil.rmtree(site / "bin", ignore_errors=True)
        for cache in list(site.rglob("__pycache__")):  # wheels may carry byte code of another Python
            shutil.rmtree(cache, ignore_errors=True)
        compiled = _compile(site, sourceless=True) if compile_bytecode else False
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    stamp.unlink(missing_ok=True)  # a swap cut short leaves no stamp: the next build rebuilds
    if target.exists():
        target.rename(retired)
    staging.rename(target)
    stamp.write_text(layer_fingerprint(compiled=compiled) + "\n")
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
    parser.add_argument("--list", action="store_true", help="print the built layer's distributions and size")
    args = parser.parse_args(argv)
    if args.list:
        site = LAYER_DIR / "python"
        for name, version in layer_distributions(site):
            print(f"{name}=={version}")
        print(f"{tree_bytes(LAYER_DIR) / 1e6:.1f} MB unzipped (limit {LAYER_MAX_BYTES / 1e6:.1f} MB)")
        return 0
    print(f"building {build_lambda().relative_to(ROOT)}")
    if args.skip_layer:
        return 0
    if layer_up_to_date() and not args.force_layer:
        print(
            f"{LAYER_DIR.relative_to(ROOT)} is up to date (requirements sha256 {layer_fingerprint()[:12]}): "
            "not rebuilt, no network used"
        )
    else:
        print(f"building {build_layer().relative_to(ROOT)} (pip: needs the package index)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
