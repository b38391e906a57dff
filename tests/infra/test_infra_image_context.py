"""The agent image's build context: only what its Dockerfile copies, so that configuring a
deployment (cdk.context.json) or creating the App (its key material) never changes the image's
asset hash (a rebuild and a push at every deploy) and no key can reach the image.

Checked with CDK's own fingerprint and staging (what `cdk deploy` hashes and hands to Docker),
over a copy of the checkout's shape in a temporary directory.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import aws_cdk as cdk
import pytest

from infra.constructs.agents import IMAGE_CONTEXT, IMAGE_EXCLUDES
from tests.infra.synth import REPO_ROOT, Synthesized

DOCKERFILE = REPO_ROOT / "functions" / "agent" / "Dockerfile"


def _checkout(root: Path) -> Path:
    files = {
        "pyproject.toml": "[project]\nname = 'squadron'\n",
        "README.md": "# Squadron\n",
        "layers/squadron/squadron/__init__.py": "",
        "layers/squadron/requirements.txt": "",
        "functions/agent/Dockerfile": DOCKERFILE.read_text(encoding="utf-8"),
        "functions/router/handler.py": "",
        "infra/app.py": "",
        "tests/test_x.py": "",
        "cdk.json": "{}",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _fingerprint(root: Path) -> str:
    return cdk.FileSystem.fingerprint(str(root), exclude=IMAGE_EXCLUDES, ignore_mode=cdk.IgnoreMode.DOCKER)


def _stage(root: Path, staged: Path) -> None:
    """What CDK copies into cdk.out as the image's build context."""
    staged.mkdir()
    cdk.FileSystem.copy_directory(
        str(root), str(staged), cdk.CopyOptions(exclude=IMAGE_EXCLUDES, ignore_mode=cdk.IgnoreMode.DOCKER)
    )


def _write(root: Path, name: str, text: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


#: What a deployer's checkout gains that must not change (or enter) the image.
OUTSIDE = [
    ("cdk.context.json", '{"stage": "prod", "github_app_id": "123456"}'),
    (
        "squadron-app/private-key.pem",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n",
    ),
    ("squadron-app/webhook-secret", "s3cret"),
    ("squadron-app.html", "<form>"),
    ("app.pem", "-----BEGIN RSA PRIVATE KEY-----\n"),
    (".env", "AWS_SECRET_ACCESS_KEY=x"),
    (".squadron-local/endpoints.json", "{}"),
    ("cdk.out/manifest.json", "{}"),
    ("layers/squadron/squadron/__pycache__/x.cpython-312.pyc", "x"),
    ("layers/squadron/squadron.egg-info/PKG-INFO", "x"),
    ("docs/operations.md", "# Operations"),
]


@pytest.mark.parametrize(("name", "text"), OUTSIDE, ids=[name for name, _ in OUTSIDE])
def test_what_a_deployer_adds_to_the_checkout_neither_rebuilds_nor_enters_the_image(
    tmp_path: Path, name: str, text: str
) -> None:
    root = _checkout(tmp_path / "checkout")
    before = _fingerprint(root)
    _write(root, name, text)
    assert _fingerprint(root) == before
    staged = tmp_path / "staged"
    _stage(root, staged)
    assert not (staged / name).exists()


@pytest.mark.parametrize(
    "name", ["layers/squadron/squadron/__init__.py", "pyproject.toml", "functions/agent/Dockerfile"]
)
def test_a_change_to_what_the_image_is_built_from_changes_its_hash(tmp_path: Path, name: str) -> None:
    root = _checkout(tmp_path)
    before = _fingerprint(root)
    _write(root, name, (root / name).read_text(encoding="utf-8") + "\n# changed\n")
    assert _fingerprint(root) != before


def test_everything_the_dockerfile_copies_is_in_the_context(tmp_path: Path) -> None:
    sources = [
        word
        for line in DOCKERFILE.read_text(encoding="utf-8").splitlines()
        if line.startswith(("COPY ", "ADD ")) and "--from=" not in line
        for word in line.split()[1:-1]
    ]
    assert sources
    root = _checkout(tmp_path / "checkout")
    staged = tmp_path / "staged"
    _stage(root, staged)
    for source in sources:
        assert (staged / source).exists(), source
        assert any(source == kept or source.startswith(kept + "/") for kept in IMAGE_CONTEXT)
    assert (staged / "functions/agent/Dockerfile").exists()
    assert sorted(p.name for p in staged.iterdir()) == ["README.md", "functions", "layers", "pyproject.toml"]
    assert not re.search(r"\b(infra|tests|functions/router)\b", " ".join(str(p) for p in staged.rglob("*")))


@pytest.mark.infra
def test_the_agent_task_image_is_built_with_the_allow_list(synthesized: Synthesized) -> None:
    """The synthesized asset was staged with the allow list: no deployment value, key or test in it."""
    assets = json.loads(next(synthesized.outdir.glob("*.assets.json")).read_text())
    (image,) = assets["dockerImages"].values()
    staged = synthesized.outdir / image["source"]["directory"]
    assert sorted(p.name for p in staged.iterdir()) == ["README.md", "functions", "layers", "pyproject.toml"]
