"""PipLayerBundling: the pip result is cached per requirements; the package is copied fresh."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import aws_cdk as cdk
import pytest

from infra.constructs.layer import LayerBuildError, PipLayerBundling

pytestmark = pytest.mark.infra


class FakePip:
    """Stands in for `subprocess.run([python, -m, pip, install, ...])`."""

    def __init__(self, returncode: int = 0) -> None:
        self.returncode = returncode
        self.calls: list[Sequence[str]] = []

    def __call__(self, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(args)
        target = Path(args[args.index("--target") + 1])
        if self.returncode == 0:
            (target / "somedep").mkdir(parents=True)
            (target / "somedep" / "__init__.py").write_text("VERSION = 1\n")
        return subprocess.CompletedProcess(args, self.returncode, stdout="", stderr="no matching wheel")


@pytest.fixture
def source(tmp_path: Path) -> Path:
    root = tmp_path / "layers" / "squadron"
    (root / "squadron" / "domain" / "__pycache__").mkdir(parents=True)
    (root / "requirements.txt").write_text("somedep==1\n")
    (root / "squadron" / "__init__.py").write_text("")
    (root / "squadron" / "domain" / "model.py").write_text("A = 1\n")
    (root / "squadron" / "domain" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"\0")
    return root


@pytest.fixture
def fake_pip() -> FakePip:
    return FakePip()


def _bundling(source: Path, tmp_path: Path, pip: FakePip) -> PipLayerBundling:
    return PipLayerBundling(
        source / "requirements.txt", source / "squadron", cache_root=tmp_path / "cache", pip_runner=pip
    )


def _bundle(bundling: PipLayerBundling, output: Path) -> Path:
    output.mkdir()
    assert bundling.try_bundle(str(output), image=cdk.DockerImage.from_registry("unused")) is True
    return output / "python"


def test_first_bundle_installs_for_the_lambda_runtime(
    source: Path, tmp_path: Path, fake_pip: FakePip
) -> None:
    bundling = _bundling(source, tmp_path, fake_pip)
    site_packages = _bundle(bundling, tmp_path / "out")

    (call,) = fake_pip.calls
    assert call[1:4] == ["-m", "pip", "install"]
    for flag in ("--platform", "manylinux2014_x86_64", "--python-version", "3.12", "--only-binary=:all:"):
        assert flag in call
    assert (site_packages / "somedep" / "__init__.py").is_file()
    assert (site_packages / "squadron" / "domain" / "model.py").read_text() == "A = 1\n"
    assert not (site_packages / "squadron" / "domain" / "__pycache__").exists()
    assert bundling.cache_dir.is_dir()
    assert [path.name for path in bundling.cache_dir.parent.iterdir()] == [bundling.cache_dir.name]


def test_cached_requirements_are_reused_but_the_package_is_fresh(
    source: Path, tmp_path: Path, fake_pip: FakePip
) -> None:
    bundling = _bundling(source, tmp_path, fake_pip)
    _bundle(bundling, tmp_path / "first")
    (source / "squadron" / "domain" / "model.py").write_text("A = 2\n")

    site_packages = _bundle(bundling, tmp_path / "second")

    assert len(fake_pip.calls) == 1
    assert (site_packages / "somedep" / "__init__.py").is_file()
    assert (site_packages / "squadron" / "domain" / "model.py").read_text() == "A = 2\n"


def test_changed_requirements_get_a_new_cache_entry(source: Path, tmp_path: Path, fake_pip: FakePip) -> None:
    bundling = _bundling(source, tmp_path, fake_pip)
    before = bundling.cache_dir
    (source / "requirements.txt").write_text("somedep==2\n")
    assert bundling.cache_dir != before
    assert bundling.cache_dir.name.startswith("layer-")


def test_failed_install_raises_and_caches_nothing(source: Path, tmp_path: Path) -> None:
    bundling = _bundling(source, tmp_path, FakePip(returncode=1))
    with pytest.raises(LayerBuildError, match="no matching wheel"):
        _bundle(bundling, tmp_path / "out")
    assert not bundling.cache_dir.exists()
    assert list((tmp_path / "cache").iterdir()) == []
