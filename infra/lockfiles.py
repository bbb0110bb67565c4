"""The dependency locks (docs/decisions/0156): every distribution at one version, with the sha256 of each file of
that release, so that two installs of one commit install the same bytes and a new release changes nothing until
someone locks it.

- ``requirements/dev.lock``: what ``make install`` installs (``pip install --require-hashes``): pyproject.toml's
  dependencies and its ``dev`` and ``infra`` extras (which take in every other extra), plus ``requirements/dev.in``
  (pip itself and setuptools, the build backend of the editable install). One resolution for CPython 3.11 and newer
  on every platform (uv's universal mode: a marker keeps a Windows- or PyPy-only line off Linux).
- ``requirements/runtime.lock``: what the Lambda layer ships: ``requirements/runtime.in`` (pyproject.toml's runtime
  dependencies less what the Lambda runtime provides, :func:`infra.packaging.layer_requirements`), resolved for the
  runtime's Python and platform (cp313, manylinux2014_aarch64, wheels only) under dev.lock as constraints: the layer
  ships the versions the tests ran.
- ``requirements/tools.lock``: the locker itself (uv), which ``make lock`` installs into ``build/lock-tools``.

``python -m infra.lockfiles --uv PATH`` (``make lock``) regenerates them, keeping every pin that still satisfies
pyproject.toml (``--upgrade``: the newest releases it admits). Each lock carries a line with the sha256 of what it
was resolved from (:func:`dev_inputs`, :func:`runtime_inputs`); tests/unit/test_lockfile.py recomputes it and fails
when pyproject.toml changed after the last ``make lock``. Stdlib only: it runs before any ``make install``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.packaging import LAMBDA_PLATFORM, ROOT, RUNTIME_LOCK, layer_requirements, locked_requirements, normalize
from infra.runtimes import LAMBDA_PYTHON

REQUIREMENTS = ROOT / "requirements"
DEV_IN, DEV_LOCK = REQUIREMENTS / "dev.in", REQUIREMENTS / "dev.lock"
RUNTIME_IN = REQUIREMENTS / "runtime.in"
TOOLS_IN, TOOLS_LOCK = REQUIREMENTS / "tools.in", REQUIREMENTS / "tools.lock"
DEV_EXTRAS = ("dev", "infra")
DEV_PYTHON = "3.11"  # requires-python's floor: the universal resolution holds from it up
DIGEST_PREFIX = "# inputs sha256: "
COMPILE = ["pip", "compile", "--quiet", "--generate-hashes", "--custom-compile-command", "make lock"]
DEV_ARGS = ["--universal", "--python-version", DEV_PYTHON, *(a for e in DEV_EXTRAS for a in ("--extra", e))]
RUNTIME_ARGS = [
    "--python-version",
    f"{LAMBDA_PYTHON[0]}.{LAMBDA_PYTHON[1]}",
    "--python-platform",
    f"{LAMBDA_PLATFORM.split('_', 1)[1]}-{LAMBDA_PLATFORM.split('_', 1)[0]}",  # aarch64-manylinux2014
    "--only-binary",
    ":all:",
]
RUNTIME_IN_HEADER = (
    "# Written by `make lock` (infra/lockfiles.py): pyproject.toml's runtime dependencies less what the Lambda\n"
    "# runtime provides. Edit pyproject.toml, never this file.\n"
)


@dataclass(frozen=True)
class Pin:
    """One line of a lock: ``name==version [; marker]`` and the sha256 of each file of that release."""

    name: str  # normalized (PEP 503)
    version: str
    marker: str
    hashes: tuple[str, ...]


def _lines(path: Path) -> list[str]:
    """The requirement lines of a ``.in`` file (comments and blanks dropped)."""
    return [s for line in path.read_text().splitlines() if (s := line.split("#", 1)[0].strip())]


def read_lock(lock: Path) -> dict[str, Pin]:
    """The pins of a lock by normalized name. A line that is not ``name==version`` raises ValueError."""
    pins: dict[str, Pin] = {}
    for line in locked_requirements(lock):
        spec, *hashes = line.split(" --hash=")
        requirement, _, marker = spec.partition(";")
        match = re.fullmatch(r"([A-Za-z0-9._-]+)==([^\s=]+)", requirement.strip())
        if match is None:
            raise ValueError(f"{lock.name}: not pinned with ==: {line[:80]}")
        name = normalize(match.group(1))
        pins[name] = Pin(name, match.group(2), marker.strip(), tuple(h.strip() for h in hashes))
    return pins


def dev_inputs(pyproject: Path = ROOT / "pyproject.toml", dev_in: Path = DEV_IN) -> dict[str, Any]:
    """What dev.lock is resolved from: pyproject's Python range, dependencies and extras, its build requirements
    (dev.in names them for uv: the editable install builds with the locked setuptools), dev.in, the resolution."""
    toml = tomllib.loads(pyproject.read_text())
    project = toml["project"]
    return {
        "build-system": toml.get("build-system", {}).get("requires", []),
        "requires-python": project.get("requires-python", ""),
        "dependencies": project.get("dependencies", []),
        "optional-dependencies": project.get("optional-dependencies", {}),
        "dev.in": _lines(dev_in),
        "resolution": DEV_ARGS,
    }


def runtime_inputs(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, Any]:
    """What runtime.lock is resolved from: the layer's requirements and the Lambda runtime's Python and platform."""
    return {"requirements": layer_requirements(pyproject), "resolution": RUNTIME_ARGS}


def inputs_digest(inputs: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def recorded_digest(lock: Path) -> str | None:
    """The inputs digest a lock's header records, or None."""
    for line in lock.read_text().splitlines():
        if line.startswith(DIGEST_PREFIX):
            return line[len(DIGEST_PREFIX) :].strip()
        if not line.startswith("#"):
            return None
    return None


def _stamp(lock: Path, digest: str) -> None:
    """Write the digest line after the header comments uv wrote (replacing an older one)."""
    lines = [line for line in lock.read_text().splitlines() if not line.startswith(DIGEST_PREFIX)]
    at = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    lines.insert(at, DIGEST_PREFIX + digest)
    lock.write_text("\n".join(lines) + "\n")


def lock(uv: str, *, upgrade: bool = False) -> None:
    """Regenerate tools.lock, dev.lock and runtime.lock with ``uv`` (the package index is needed)."""
    again = ["--upgrade"] if upgrade else []

    def compile_(*args: str | Path) -> None:
        subprocess.run([uv, *COMPILE, *again, *map(str, args)], cwd=ROOT, check=True)

    rel = {p: p.relative_to(ROOT) for p in (TOOLS_IN, TOOLS_LOCK, DEV_IN, DEV_LOCK, RUNTIME_IN, RUNTIME_LOCK)}
    compile_("--universal", rel[TOOLS_IN], "-o", rel[TOOLS_LOCK])
    compile_(*DEV_ARGS, "pyproject.toml", rel[DEV_IN], "-o", rel[DEV_LOCK])
    _stamp(DEV_LOCK, inputs_digest(dev_inputs()))
    RUNTIME_IN.write_text(RUNTIME_IN_HEADER + "".join(f"{r}\n" for r in layer_requirements()))
    compile_(*RUNTIME_ARGS, rel[RUNTIME_IN], "-c", rel[DEV_LOCK], "-o", rel[RUNTIME_LOCK])
    _stamp(RUNTIME_LOCK, inputs_digest(runtime_inputs()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.lockfiles", description=__doc__.splitlines()[0])
    parser.add_argument("--uv", required=True, help="the uv executable (make lock installs it from tools.lock)")
    parser.add_argument("--upgrade", action="store_true", help="the newest releases pyproject.toml admits")
    args = parser.parse_args(argv)
    lock(args.uv, upgrade=args.upgrade)
    for path in (DEV_LOCK, RUNTIME_LOCK):
        print(f"{path.relative_to(ROOT)}: {len(read_lock(path))} pins")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
