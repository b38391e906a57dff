"""A GitHub sandbox with what a person browses: an issue a stranger filled with hostile text, a pull
request with a real git diff, comments, a review, statuses and a check run, and the App's
dashboard issue with its Mermaid graph. Everything is made through the sandbox's REST API (and a
real ``git push``), as the App, humans and strangers make it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from squadron.domain.dashboard import LABEL, TITLE
from squadron.local.examples import first_examples
from squadron.local.sandbox import GitHubSandbox
from tests.support.git_remote import IDENTITY, git

ROOT = Path(__file__).resolve().parents[2]
REPO = "octo/demo"
BOT_TOKEN = "ghs_pages_test_installation_token"  # a test's own token
#: What a stranger writes, trying to run script in the browser of whoever reads it.
HOSTILE = """\
<script>window.pwned = "script tag"</script>

<img src=x onerror="window.pwned = 'img onerror'">

[click me](javascript:window.pwned='javascript link') <b onmouseover="window.pwned='b'">bold</b>

```mermaid
flowchart LR
    a["<img src=x onerror=window.pwned='mermaid'>"] --> b
    click a call pwn()
```
"""
HOSTILE_TITLE = '<script>window.pwned = "title"</script> export the report'
GRAPH = """\
flowchart LR
    i1["#1 working"]
    i4["#4"]
    i1 -->|blocked by| i4"""
DASHBOARD = f"""\
## Agents

- dev `dev-1` on [#1](https://github.com/{REPO}/issues/1): working

## Blockers

```mermaid
{GRAPH}
```
"""


@dataclass
class Browsable:
    github: GitHubSandbox
    issue: int
    pull: int
    dashboard: int
    head_sha: str


def _call(github: GitHubSandbox, token: str, method: str, path: str, body: Any = None) -> Any:
    answer = httpx.request(
        method, f"{github.base_url}{path}", json=body, headers={"authorization": f"token {token}"}
    )
    assert answer.status_code < 300, (method, path, answer.status_code, answer.text)
    return answer.json() if answer.content else None


def _push(github: GitHubSandbox, work: Path, branch: str, files: dict[str, str]) -> str:
    """A developer pushes ``files`` on a new ``branch`` (real git through the bare repository)."""
    clone = work / "clone"
    subprocess.run(["git", "clone", "--quiet", github.git_url(REPO), str(clone)], env=IDENTITY, check=True)
    git(clone, "checkout", "--quiet", "-b", branch)
    for name, text in files.items():
        (clone / name).write_text(text)
    git(clone, "add", "-A")
    git(clone, "commit", "--quiet", "-m", "Export the report")
    git(clone, "push", "--quiet", "origin", branch)
    return git(clone, "rev-parse", "HEAD")


@contextmanager
def browsable_sandbox(tmp_path: Path) -> Iterator[Browsable]:
    github = GitHubSandbox(tmp_path / "github", webhook_secret="pages-test-secret", examples=first_examples())
    github.node_modules = ROOT / "node_modules"
    github.add_repository(
        REPO,
        {"README.md": "# demo\n", "report.py": "def report():\n    return 1\n"},
        permissions={"octo-human": "admin"},
    )
    github.add_repository("octo/other", {"README.md": "# other\n"})
    github.tokens[BOT_TOKEN] = github.bot_login
    github.start()
    try:
        stranger, human = "human:a-stranger", "human:octo-human"
        issue = _call(
            github, stranger, "POST", f"/repos/{REPO}/issues", {"title": HOSTILE_TITLE, "body": HOSTILE}
        )
        head = _push(
            github,
            tmp_path,
            "feat/issue-1",
            {"report.py": "def report():\n    return 2\n", "export.py": "def export():\n    return '<b>'\n"},
        )
        pull = _call(
            github,
            BOT_TOKEN,
            "POST",
            f"/repos/{REPO}/pulls",
            {
                "title": "Export the report",
                "head": "feat/issue-1",
                "base": "main",
                "body": f"Closes #{issue['number']}\n\nSee [the issue](https://github.com/{REPO}/issues/1).",
            },
        )
        number = pull["number"]
        _call(github, stranger, "POST", f"/repos/{REPO}/issues/{number}/comments", {"body": HOSTILE})
        _call(github, human, "POST", f"/repos/{REPO}/issues/{number}/comments", {"body": "Looks **good**."})
        _call(
            github,
            human,
            "POST",
            f"/repos/{REPO}/pulls/{number}/reviews",
            {"event": "APPROVE", "body": "Ship it"},
        )
        _call(
            github,
            BOT_TOKEN,
            "POST",
            f"/repos/{REPO}/statuses/{head}",
            {"state": "success", "context": "squadron/approval", "description": "approved by octo-human"},
        )
        _call(
            github,
            BOT_TOKEN,
            "POST",
            f"/repos/{REPO}/check-runs",
            {"name": "tests", "head_sha": head, "status": "completed", "conclusion": "success"},
        )
        dashboard = _call(
            github,
            BOT_TOKEN,
            "POST",
            f"/repos/{REPO}/issues",
            {"title": TITLE, "body": DASHBOARD, "labels": [LABEL]},
        )
        yield Browsable(github, issue["number"], number, dashboard["number"], head)
    finally:
        github.stop()
