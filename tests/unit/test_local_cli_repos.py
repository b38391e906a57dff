"""``squadron local --repo``: one sandbox repository or several under the App's one installation."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from squadron.cli import build_parser, main
from squadron.local_cli import local_options
from tests.support.github_fake import app_private_key

CASES = [
    ([], "octo/demo", ()),
    (["--repo", "octo/a"], "octo/a", ()),
    (["--repo", "octo/a", "--repo", "acme/b", "--repo", "octo/c"], "octo/a", ("acme/b", "octo/c")),
    (["--repo", "octo/a", "--repo", "octo/b", "--repo", "octo/a"], "octo/a", ("octo/b",)),
]


@pytest.mark.parametrize(("argv", "repo", "extra"), CASES, ids=["default", "one", "three", "named twice"])
def test_the_sandbox_serves_every_repository_named(
    tmp_path: Path, argv: list[str], repo: str, extra: tuple[str, ...]
) -> None:
    args = build_parser().parse_args(["local", *argv])
    options = local_options(args, tmp_path, tmp_path / "state", {}, None)
    assert (options.repo, options.extra_repos) == (repo, extra)


def test_repositories_are_the_sandboxs_not_real_githubs(tmp_path: Path) -> None:
    key = tmp_path / "app.pem"
    key.write_text(app_private_key()[0])
    file = tmp_path / "github-app.yaml"
    file.write_text(f"app_id: 1\nprivate_key_file: {key}\nwebhook_secret: s\n")
    out = io.StringIO()
    status = main(["local", "--repo", "octo/a", "--github-app", str(file)], out=out)
    assert status == 1 and "--repo names sandbox repositories" in out.getvalue()
