"""The dependencies layer is rebuilt only when out of date, and a rebuild never removes the built layer before the
new one is complete. pip is replaced by an installer that writes a module (no network, no package index)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra import packaging


def _installer(version: str):
    def install(site: Path) -> None:
        (site / "dep.py").write_text(f"VERSION = {version!r}\n")
    return install


def test_a_built_layer_is_up_to_date_until_its_requirements_change(tmp_path: Path) -> None:
    target, stamp = tmp_path / "layer", tmp_path / "layer.stamp"
    # Given no layer: it is not up to date
    assert not packaging.layer_up_to_date(target, stamp)
    # When it is built
    packaging.build_layer(target, stamp, install=_installer("1"))
    # Then it is, and its stamp is the fingerprint of pyproject's runtime requirements for the Lambda platform
    assert packaging.layer_up_to_date(target, stamp)
    assert stamp.read_text().strip() == packaging.layer_fingerprint()
    assert (target / "python" / "dep.py").read_text() == "VERSION = '1'\n"
    # and another requirement set (a changed pyproject) would not match it
    assert packaging.layer_fingerprint(["pydantic==1.0"]) != packaging.layer_fingerprint()
    stamp.write_text(packaging.layer_fingerprint(["pydantic==1.0"]))
    assert not packaging.layer_up_to_date(target, stamp)


def test_a_failed_rebuild_keeps_the_previous_layer(tmp_path: Path) -> None:
    target, stamp = tmp_path / "layer", tmp_path / "layer.stamp"
    packaging.build_layer(target, stamp, install=_installer("1"))

    def broken(site: Path) -> None:
        (site / "half.py").write_text("x = 1\n")
        raise OSError("the package index is unreachable")

    # When a rebuild fails half-way (pip without network)
    with pytest.raises(OSError):
        packaging.build_layer(target, stamp, install=broken)
    # Then the previous layer and its stamp are untouched, and no staging directory is left
    assert sorted(p.name for p in (target / "python").iterdir() if p.suffix == ".py") == ["dep.py"]
    assert packaging.layer_up_to_date(target, stamp)
    assert not (tmp_path / "layer.new").exists() and not (tmp_path / "layer.old").exists()
    # and a successful rebuild replaces it whole
    packaging.build_layer(target, stamp, install=_installer("2"))
    assert (target / "python" / "dep.py").read_text() == "VERSION = '2'\n"
    assert not (target / "python" / "half.py").exists()
