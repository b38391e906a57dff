"""``squadron local --repo``: one sandbox repository or several under the App's one installation;
``--demo change-set`` plays on its own three."""

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
    (["--demo", "change-set"], "octo/schema", ("octo/server", "octo/client")),
    (["--demo"], "octo/demo", ()),
]


@pytest.mark.parametrize(
    ("argv", "repo", "extra"),
    CASES,
    ids=["default", "one", "three", "named twice", "the change-set demo", "the demo"],
)
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


def test_the_change_set_demo_refuses_other_repositories_before_starting(tmp_path: Path) -> None:
    out = io.StringIO()
    argv = ["local", "--demo", "change-set", "--repo", "octo/a", "--state", str(tmp_path / "state")]
    status = main(argv, out=out)
    assert status == 1
    assert (
        "--demo change-set plays on its own repositories (octo/schema, octo/server, octo/client)"
        in out.getvalue()
    )
    assert not (tmp_path / "state").exists()  # nothing started, nothing emptied


def test_an_unknown_demo_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as caught:
        build_parser().parse_args(["local", "--demo", "merge-train"])
    assert caught.value.code == 2
