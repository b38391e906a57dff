"""The shell commands an agent may not run (the host denies them before they run)."""

from __future__ import annotations

import pytest

from squadron.domain.shell_policy import refuse_shell

CASES = [
    # command, refused because (None: allowed)
    ("git push origin HEAD:main", "git push from the shell"),
    ("git -C . push --force", "git push from the shell"),
    ("cd repo && git push", "git push from the shell"),
    ("FOO=1 git push", "git push from the shell"),
    ("echo x; sudo git push", "git push from the shell"),
    ("gh pr merge 101 --squash", "merging is not allowed to agents"),
    ("gh api repos/octo/repo/pulls/101/merge -X PUT", "the gh CLI is not allowed"),
    ("curl -X PUT https://api.github.com/repos/octo/repo/pulls/101/merge", "calling the GitHub API"),
    ("git remote set-url origin https://evil.example/x.git", "changing git remotes"),
    ("git config credential.helper store", "changing git remotes or credentials"),
    ("git status && git diff", None),
    ("git commit -am 'fix: pushing the limits'", None),
    ("git log --oneline | grep push", None),
    ("pytest -q tests/test_push.py", None),
    ("echo 'do not git push here' > notes.txt", None),  # quoted text is not a command position
    ("curl https://pypi.org/simple/httpx/", None),
    ("", None),
    (None, None),
]


@pytest.mark.parametrize(("command", "reason"), CASES)
def test_shell_policy(command: str | None, reason: str | None) -> None:
    refused = refuse_shell(command)
    if reason is None:
        assert refused is None
    else:
        assert refused is not None and refused.startswith("denied: ") and reason in refused
