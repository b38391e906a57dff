"""The shared Lambda layer: the `squadron` package and its pinned dependencies.

It is bundled on this machine, without Docker: pip downloads manylinux wheels for
the Lambda runtime (CPython 3.12, x86_64) into `python/`, and the package source is
copied next to them. The pip result depends only on requirements.txt and the target
platform, so it is cached under `~/.cache/squadron/layer-<hash>` (or
`$XDG_CACHE_HOME/squadron/...`); the package source is copied fresh on every bundle.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

REPO_ROOT = Path(__file__).resolve().parents[2]
LAYER_SOURCE = REPO_ROOT / "layers" / "squadron"

# Files of the source tree that never belong in the layer; they also stay out of the
# asset hash, so a test run or an editable install does not change the layer.
_SOURCE_EXCLUDES = ["**/__pycache__", "**/*.pyc", "*.egg-info", ".mypy_cache", ".pytest_cache"]


def default_cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "squadron"


class LayerBuildError(RuntimeError):
    """pip could not install the layer's requirements; `output` holds what pip said."""

    def __init__(self, requirements: Path, output: str) -> None:
        self.requirements = requirements
        self.output = output
        super().__init__(f"pip could not install {requirements} for the Lambda layer:\n{output}")


PipRunner = Callable[[Sequence[str]], subprocess.CompletedProcess[str]]


def run_pip(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, check=False)  # noqa: S603 - no shell


@jsii.implements(cdk.ILocalBundling)
class PipLayerBundling:
    """Local bundling of a Python layer: cached `pip install --target`, then the package source."""

    # The Lambda runtime the wheels are chosen for; must match SharedLayer.RUNTIME.
    PIP_TARGET_ARGS = (
        "--platform",
        "manylinux2014_x86_64",
        "--implementation",
        "cp",
        "--python-version",
        "3.12",
        "--only-binary=:all:",
    )

    def __init__(
        self, requirements: Path, package_dir: Path, cache_root: Path, pip_runner: PipRunner = run_pip
    ) -> None:
        self.requirements = requirements
        self.package_dir = package_dir
        self.cache_root = cache_root
        self.pip_runner = pip_runner

    @property
    def cache_dir(self) -> Path:
        """Where the pip result for this requirements file and target platform is kept."""
        digest = hashlib.sha256(self.requirements.read_bytes())
        digest.update("\0".join(self.PIP_TARGET_ARGS).encode())
        return self.cache_root / f"layer-{digest.hexdigest()[:16]}"

    def try_bundle(self, output_dir: str, *, image: cdk.DockerImage, **_options: object) -> bool:
        """Fill `output_dir`; never returns False, because the Docker fallback must not run."""
        site_packages = Path(output_dir) / "python"
        shutil.copytree(self._installed_requirements(), site_packages, dirs_exist_ok=True)
        shutil.copytree(
            self.package_dir,
            site_packages / self.package_dir.name,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            dirs_exist_ok=True,
        )
        return True

    def _installed_requirements(self) -> Path:
        cache_dir = self.cache_dir
        if cache_dir.is_dir():
            return cache_dir
        cache_dir.parent.mkdir(parents=True, exist_ok=True)
        # Install next to the cache entry, then rename: the entry exists only when
        # complete, and two concurrent synths cannot corrupt each other.
        staging = cache_dir.with_name(f".{cache_dir.name}.{os.getpid()}.tmp")
        shutil.rmtree(staging, ignore_errors=True)
        result = self.pip_runner(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-compile",  # .pyc files of the build Python would not match 3.12
                "--requirement",
                str(self.requirements),
                "--target",
                str(staging),
                *self.PIP_TARGET_ARGS,
            ]
        )
        if result.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise LayerBuildError(self.requirements, result.stderr or result.stdout)
        try:
            staging.rename(cache_dir)
        except OSError:
            # Another synth filled the same entry first; both results are equivalent.
            shutil.rmtree(staging, ignore_errors=True)
        return cache_dir


class SharedLayer(Construct):
    """The layer every Squadron function uses: `squadron` + Powertools, pydantic, PyJWT, ..."""

    RUNTIME = lambda_.Runtime.PYTHON_3_12
    ARCHITECTURE = lambda_.Architecture.X86_64

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        source_dir: Path = LAYER_SOURCE,
        cache_root: Path | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.bundling = PipLayerBundling(
            requirements=source_dir / "requirements.txt",
            package_dir=source_dir / "squadron",
            cache_root=cache_root or default_cache_root(),
        )
        self.layer = self._build_layer(source_dir)

    def _build_layer(self, source_dir: Path) -> lambda_.LayerVersion:
        code = lambda_.Code.from_asset(
            str(source_dir),
            exclude=_SOURCE_EXCLUDES,
            # The source hash (requirements + package) names the bundle, so an
            # unchanged layer is not bundled again within one cdk.out.
            asset_hash_type=cdk.AssetHashType.SOURCE,
            bundling=cdk.BundlingOptions(
                # Required by the API; never used, since local bundling always succeeds.
                image=self.RUNTIME.bundling_image,
                local=self.bundling,
            ),
        )
        return lambda_.LayerVersion(
            self,
            "Layer",
            code=code,
            compatible_runtimes=[self.RUNTIME],
            compatible_architectures=[self.ARCHITECTURE],
            description="Squadron: the squadron package and its pinned runtime dependencies",
        )
