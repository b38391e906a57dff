"""The agent's working copy against a real bare repository: prepare, commit, push, review checkouts."""

from __future__ import annotations

import base64
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from squadron.adapters.git import GitError, GitRemote, WorkingCopy
from squadron.domain.permissions import Caller, CallerKind, PermissionDeniedError
from tests.support.git_remote import BareRemote, git

DEV = Caller(CallerKind.DEV, "feat-dev-38", "feat-dev", "feat/issue-38")
BRANCH = "feat/issue-38"


@pytest.fixture
def remote(tmp_path: Path) -> BareRemote:
    return BareRemote.create(tmp_path / "github", {"README.md": "# octo\n", "app.py": "print('v1')\n"})


def copy(remote: BareRemote, tmp_path: Path, token: str | None = None) -> WorkingCopy:
    return WorkingCopy(
        tmp_path / "work" / "1-38-feat-dev",
        GitRemote(remote.url, (lambda: token) if token else None),
        author_name="feat-dev-38 (squadron)",
        author_email="squadron[bot]@users.noreply.github.com",
    )


@pytest.mark.parametrize(
    ("remote_has_branch", "expected"),
    [
        (False, "Created branch feat/issue-38 from main."),
        (True, "Checked out feat/issue-38 from the remote."),
    ],
)
def test_a_fresh_working_copy_starts_from_the_branch_or_the_base(
    remote: BareRemote, tmp_path: Path, remote_has_branch: bool, expected: str
) -> None:
    if remote_has_branch:
        remote.commit(BRANCH, {"spec.md": "the plan\n"}, "a human started the branch")
    wc = copy(remote, tmp_path)
    assert wc.prepare(BRANCH, "main") == expected
    assert wc.current_branch() == BRANCH
    assert (wc.path / "spec.md").exists() is remote_has_branch
    assert (wc.path / "app.py").read_text() == "print('v1')\n"


def test_a_missing_base_branch_is_a_clear_error(remote: BareRemote, tmp_path: Path) -> None:
    with pytest.raises(GitError, match="neither feat/issue-38 nor the base branch develop exists"):
        copy(remote, tmp_path).prepare(BRANCH, "develop")


def test_commit_push_and_a_woken_agent_keeps_its_files(remote: BareRemote, tmp_path: Path) -> None:
    wc = copy(remote, tmp_path)
    wc.prepare(BRANCH, "main")
    assert wc.commit_all("nothing") is None  # a clean tree commits nothing
    (wc.path / "app.py").write_text("print('v2')\n")
    (wc.path / "notes.txt").write_text("half done\n")
    sha = wc.commit_all("Export API, part 1")
    assert sha is not None
    result = wc.push(DEV, BRANCH)
    assert (result.pushed, result.sha) == (True, sha)
    assert remote.sha(BRANCH) == sha
    assert remote.show(BRANCH, "app.py") == "print('v2')"
    assert wc.push(DEV, BRANCH).detail == "already up to date"

    (wc.path / "scratch.txt").write_text("uncommitted\n")  # left behind when the task slept
    woken = copy(remote, tmp_path)
    assert woken.prepare(BRANCH, "main") == "Kept your working copy of feat/issue-38."
    assert (woken.path / "scratch.txt").read_text() == "uncommitted\n"
    author = git(woken.path, "log", "-1", "--format=%an <%ae>")
    assert author == "feat-dev-38 (squadron) <squadron[bot]@users.noreply.github.com>"


def test_a_human_push_is_fast_forwarded_or_reported_never_overwritten(
    remote: BareRemote, tmp_path: Path
) -> None:
    wc = copy(remote, tmp_path)
    wc.prepare(BRANCH, "main")
    (wc.path / "a.txt").write_text("agent\n")
    wc.commit_all("agent work")
    wc.push(DEV, BRANCH)

    remote.commit(BRANCH, {"human.txt": "fix\n"}, "a human helped")
    assert wc.prepare(BRANCH, "main") == (
        "Kept your working copy of feat/issue-38 and fast-forwarded it by 1 new commit(s)."
    )
    assert (wc.path / "human.txt").exists()

    remote.commit(BRANCH, {"human2.txt": "more\n"}, "a human helped again")
    (wc.path / "b.txt").write_text("agent again\n")
    wc.commit_all("more agent work")
    assert "the remote has 1 commit(s) you do not have and you have 1" in wc.prepare(BRANCH, "main")
    rejected = wc.push(DEV, BRANCH)
    assert rejected.pushed is False
    assert rejected.detail.startswith("rejected: feat/issue-38 on the remote has commits you do not have")
    assert remote.log(BRANCH)[0] == "a human helped again"  # nothing was overwritten


@pytest.mark.parametrize(
    ("caller", "branch", "reason"),
    [
        (DEV, "main", "branch main is not its own (feat/issue-38)"),
        (DEV, "feat/issue-39", "branch feat/issue-39 is not its own"),
        (Caller(CallerKind.REVIEW, "pr-review-101", "pr-review"), BRANCH, "the review role never does"),
        (Caller(CallerKind.PM, "pm", "pm"), "main", "the pm role never does"),
    ],
)
def test_only_the_agents_own_branch_is_pushed(
    remote: BareRemote, tmp_path: Path, caller: Caller, branch: str, reason: str
) -> None:
    wc = copy(remote, tmp_path)
    wc.prepare(BRANCH, "main")
    if branch != BRANCH:
        git(wc.path, "branch", "-f", branch, "HEAD")
    (wc.path / "x.txt").write_text("x\n")
    wc.commit_all("x")
    before = {b: remote.sha(b) for b in ("main", BRANCH, "feat/issue-39")}
    with pytest.raises(PermissionDeniedError, match=re.escape(reason)):
        wc.push(caller, branch)
    assert {b: remote.sha(b) for b in before} == before


def test_save_commits_and_pushes_work_in_progress(remote: BareRemote, tmp_path: Path) -> None:
    wc = copy(remote, tmp_path)
    wc.prepare(BRANCH, "main")
    (wc.path / "wip.py").write_text("x = 1\n")
    git(wc.path, "checkout", "--quiet", "-b", "experiment")  # the model wandered off its branch
    said = wc.save(DEV, BRANCH, "WIP: blocked by #42")
    assert said.startswith("committed ") and "pushed" in said
    assert remote.log(BRANCH)[0] == "WIP: blocked by #42"
    assert remote.show(BRANCH, "wip.py") == "x = 1"
    assert wc.save(DEV, BRANCH, "WIP again") == "nothing to save: no commits the remote lacks"


def test_save_pushes_commits_the_model_made_itself_and_skips_an_untouched_branch(
    remote: BareRemote, tmp_path: Path
) -> None:
    wc = copy(remote, tmp_path)
    wc.prepare(BRANCH, "main")
    assert wc.save(DEV, BRANCH, "WIP") == "nothing to save: no commits the remote lacks"
    assert remote.sha(BRANCH) is None  # no empty branch on GitHub
    (wc.path / "done.py").write_text("ok = True\n")
    git(wc.path, "add", "done.py")
    git(wc.path, "commit", "--quiet", "-m", "the model committed with its bash tool")
    assert wc.save(DEV, BRANCH, "WIP").startswith("pushed ")
    assert remote.log(BRANCH)[0] == "the model committed with its bash tool"


def test_save_never_raises(remote: BareRemote, tmp_path: Path) -> None:
    wc = copy(remote, tmp_path)
    wc.prepare(BRANCH, "main")
    (wc.path / "wip.py").write_text("x = 1\n")
    said = wc.save(Caller(CallerKind.DEV, "feat-dev-38", "feat-dev", "feat/other"), BRANCH, "WIP")
    assert said.startswith("work in progress not saved: feat-dev-38 (dev role) may not push")


def test_a_review_checkout_is_the_pull_requests_head(remote: BareRemote, tmp_path: Path) -> None:
    head = remote.commit(BRANCH, {"app.py": "print('v2')\n"}, "the change under review")
    remote.set_ref("refs/pull/101/head", head)
    wc = copy(remote, tmp_path)
    assert wc.prepare_review("refs/pull/101/head", head) == (
        f"The pull request's head {head[:7]} is checked out (read-only)."
    )
    assert (wc.path / "app.py").read_text() == "print('v2')\n"
    (wc.path / "app.py").write_text("tampered\n")
    newer = remote.commit(BRANCH, {"app.py": "print('v3')\n"}, "synchronize")
    remote.set_ref("refs/pull/101/head", newer)
    wc.prepare_review("refs/pull/101/head", newer)  # a re-review starts clean at the new head
    assert (wc.path / "app.py").read_text() == "print('v3')\n"


def test_the_token_goes_to_git_per_command_and_is_never_stored(remote: BareRemote, tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []

    def recording(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append({"args": args, "env": kwargs["env"]})
        return subprocess.run(args, **kwargs)  # noqa: PLW1510 (check is in kwargs)

    wc = WorkingCopy(
        tmp_path / "work" / "a",
        GitRemote(remote.url, lambda: "ghs_narrowed"),
        author_name="a",
        author_email="a@example.com",
        run=recording,
    )
    wc.prepare(BRANCH, "main")
    header = "AUTHORIZATION: basic " + base64.b64encode(b"x-access-token:ghs_narrowed").decode()
    fetch = next(c for c in calls if c["args"][1] == "fetch")
    assert header in fetch["env"].values()
    local = next(c for c in calls if c["args"][1] == "checkout")
    assert header not in local["env"].values()  # only commands that reach the remote get it
    assert all("ghs_narrowed" not in " ".join(c["args"]) for c in calls)  # never in argv
    assert "ghs_narrowed" not in (wc.path / ".git" / "config").read_text()
    assert (
        base64.b64encode(b"x-access-token:ghs_narrowed").decode()
        not in (wc.path / ".git" / "config").read_text()
    )
