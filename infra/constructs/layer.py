"""The shared Lambda layer: the `squadron` package and its pinned dependencies.

It is bundled on this machine, without Docker: pip downloads manylinux wheels for
the Lambda runtime (CPython 3.12, x86_64) into `python/`, and the package source is
copied next to them. The pip result depends only on requirements.txt and the target
platform, so it is cached under `~/.cache/squadron/layer-<hash>` (or
`$XDG_CACHE_HOME/squadron/...`); the package source is copied fresh on every bundle.

Both the layer and every function's code ship bytecode for the runtime's CPython 3.12
(:class:`Bytecode`): Lambda's /opt and /var/task are read-only, so without it every cold
start compiles every module it imports. Bytecode is version-specific, so it is compiled by
a CPython 3.12: one on this machine (``python3.12``, pyenv's, or ``SQUADRON_PYTHON312``),
else Docker's (the runtime's build image; a deploy needs Docker anyway, for the agent image).
The .pyc files are hash-based and unchecked (PEP 552): a deployment package's file times
are not the ones they were compiled against, and nothing there changes after the deploy.
"""

from __future__ import annotations

import functools
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


class Bytecode:
    """Compiles a directory's Python files for Lambda's CPython 3.12 (``__pycache__/*.cpython-312.pyc``)."""

    VERSION = (3, 12)
    #: The runtime's build image, where no CPython 3.12 is installed locally.
    DOCKER_IMAGE = "public.ecr.aws/sam/build-python3.12:latest"

    def __init__(self, python: str | None = None) -> None:
        self._python = python

    @functools.cached_property
    def python(self) -> str | None:
        """A CPython 3.12 on this machine, or None (then Docker compiles)."""
        candidates = [
            self._python,
            os.environ.get("SQUADRON_PYTHON312"),
            shutil.which("python3.12"),
            *sorted(
                str(p)
                for p in Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")).glob(
                    "versions/3.12*/bin/python3.12"
                )
            ),
        ]
        for candidate in candidates:
            if candidate and self._is_312(candidate):
                return candidate
        return None

    def _is_312(self, python: str) -> bool:
        try:
            done = subprocess.run(  # noqa: S603 - an interpreter path, no shell
                [python, "-c", "import sys; print(sys.version_info[:2] == (3, 12))"],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode == 0 and done.stdout.strip() == "True"

    def compile(self, directory: Path) -> None:
        """Compile every .py under ``directory`` in place (unchecked hash-based .pyc)."""
        args = ["-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash"]
        if self.python is not None:
            done = subprocess.run(  # noqa: S603 - an interpreter path, no shell
                [self.python, *args, str(directory)], capture_output=True, text=True, check=False
            )
        else:
            docker = shutil.which("docker")
            if docker is None:
                raise LayerBuildError(
                    directory,
                    "no CPython 3.12 to compile Lambda bytecode with: install python3.12 (or set "
                    "SQUADRON_PYTHON312 to one), or run Docker",
                )
            done = subprocess.run(  # noqa: S603 - docker, no shell
                [
                    docker, "run", "--rm", "--platform", "linux/amd64", "-v", f"{directory}:/asset",
                    "--entrypoint", "python3", self.DOCKER_IMAGE, *args, "/asset",
                ],
                capture_output=True,
                text=True,
                check=False,
            )  # fmt: skip
        if done.returncode != 0:
            raise LayerBuildError(directory, done.stderr or done.stdout)


@jsii.implements(cdk.ILocalBundling)
class CompiledCode:
    """Local bundling of a function's code: its files, and their CPython 3.12 bytecode."""

    def __init__(self, source: Path, bytecode: Bytecode) -> None:
        self.source = source
        self.bytecode = bytecode

    def try_bundle(self, output_dir: str, *, image: cdk.DockerImage, **_options: object) -> bool:
        shutil.copytree(
            self.source, output_dir, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), dirs_exist_ok=True
        )
        self.bytecode.compile(Path(output_dir))
        return True


#: One finder for every asset of a synth (it asks each candidate interpreter once).
BYTECODE = Bytecode()


def function_code(source: Path) -> lambda_.Code:
    """A function's code asset: its directory with CPython 3.12 bytecode (see :class:`Bytecode`)."""
    return lambda_.Code.from_asset(
        str(source),
        exclude=_SOURCE_EXCLUDES,
        asset_hash_type=cdk.AssetHashType.SOURCE,
        bundling=cdk.BundlingOptions(
            image=SharedLayer.RUNTIME.bundling_image, local=CompiledCode(source, BYTECODE)
        ),
    )


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
        self,
        requirements: Path,
        package_dir: Path,
        cache_root: Path,
        pip_runner: PipRunner = run_pip,
        bytecode: Bytecode | None = None,
    ) -> None:
        self.requirements = requirements
        self.package_dir = package_dir
        self.cache_root = cache_root
        self.pip_runner = pip_runner
        self.bytecode = bytecode

    @property
    def cache_dir(self) -> Path:
        """Where the pip result for this requirements file and target platform is kept (with its
        3.12 bytecode when it is compiled)."""
        digest = hashlib.sha256(self.requirements.read_bytes())
        digest.update("\0".join(self.PIP_TARGET_ARGS).encode())
        digest.update(b"bytecode" if self.bytecode is not None else b"source")
        return self.cache_root / f"layer-{digest.hexdigest()[:16]}"

    def try_bundle(self, output_dir: str, *, image: cdk.DockerImage, **_options: object) -> bool:
        """Fill `output_dir`; never returns False, because the Docker fallback must not run."""
        site_packages = Path(output_dir) / "python"
        shutil.copytree(self._installed_requirements(), site_packages, dirs_exist_ok=True)
        package = site_packages / self.package_dir.name
        shutil.copytree(
            self.package_dir,
            package,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            dirs_exist_ok=True,
        )
        if self.bytecode is not None:
            self.bytecode.compile(package)  # the requirements' bytecode is cached with them
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
        if self.bytecode is not None:
            self.bytecode.compile(staging)
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
            bytecode=BYTECODE,
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
