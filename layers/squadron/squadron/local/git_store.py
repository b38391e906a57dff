"""The sandbox's repositories: bare git repositories on disk, read and written with git itself.

Agents clone and push them like GitHub remotes (a local path is a git URL), so
branches, pull request diffs and merges in the sandbox are real git. A
``post-receive`` hook tells the sandbox about every push (it sends
``pull_request.synchronize`` for open pull requests on the pushed branch).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from squadron.errors import SquadronError

IDENTITY = {
    "GIT_AUTHOR_NAME": "GitHub Sandbox",
    "GIT_AUTHOR_EMAIL": "sandbox@squadron.local",
    "GIT_COMMITTER_NAME": "GitHub Sandbox",
    "GIT_COMMITTER_EMAIL": "sandbox@squadron.local",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}

_HOOK = """#!{python}
# Tell the GitHub sandbox which refs this push moved (stdin: "<old> <new> <ref>" lines).
import json, sys, urllib.request
updates = [line.split() for line in sys.stdin if line.strip()]
body = json.dumps({{"repository": {repo!r}, "updates": updates}}).encode()
request = urllib.request.Request({url!r}, data=body, headers={{"content-type": "application/json"}})
try:
    urllib.request.urlopen(request, timeout=10).read()
except Exception as exc:  # the push itself succeeded; the sandbox logs what it missed
    print(f"sandbox not told of the push: {{exc}}", file=sys.stderr)
"""


class GitStoreError(SquadronError):
    pass


@dataclass(frozen=True)
class ChangedFile:
    filename: str
    status: str
    additions: int
    deletions: int
    patch: str


class GitStore:
    """One bare repository."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def git(self, *args: str, check: bool = True, stdin: str | None = None) -> str:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **IDENTITY}
        done = subprocess.run(
            ["git", *args], cwd=self.path, env=env, capture_output=True, text=True, input=stdin, check=False
        )
        if check and done.returncode != 0:
            raise GitStoreError(f"git {' '.join(args[:2])}: {done.stderr.strip()}")
        return done.stdout.strip()

    @classmethod
    def create(cls, path: Path, files: dict[str, str], *, default_branch: str = "main") -> GitStore:
        """A bare repository whose ``default_branch`` holds ``files`` in one initial commit."""
        path.mkdir(parents=True, exist_ok=True)
        store = cls(path)
        store.git("init", "--quiet", "--bare", f"--initial-branch={default_branch}")
        blobs = {name: store.git("hash-object", "-w", "--stdin", stdin=text) for name, text in files.items()}
        tree = store._tree(blobs)
        commit = store.git("commit-tree", tree, "-m", "Initial commit")
        store.git("update-ref", f"refs/heads/{default_branch}", commit)
        return store

    def _tree(self, blobs: dict[str, str]) -> str:
        """A tree object for ``{path: blob sha}`` (nested directories built bottom-up)."""
        entries: dict[str, str] = {}
        subdirs: dict[str, dict[str, str]] = {}
        for name, sha in blobs.items():
            head, _, rest = name.partition("/")
            if rest:
                subdirs.setdefault(head, {})[rest] = sha
            else:
                entries[head] = f"100644 blob {sha}\t{head}"
        for name, children in subdirs.items():
            entries[name] = f"040000 tree {self._tree(children)}\t{name}"
        listing = "".join(f"{entry}\n" for _, entry in sorted(entries.items()))
        return self.git("mktree", stdin=listing)

    def install_push_hook(self, url: str, repo: str) -> None:
        hook = self.path / "hooks" / "post-receive"
        hook.parent.mkdir(parents=True, exist_ok=True)
        hook.write_text(_HOOK.format(python=sys.executable, repo=repo, url=url))
        hook.chmod(0o755)

    # --- reads -------------------------------------------------------------------------------

    def sha(self, ref: str) -> str | None:
        out = self.git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        return out or None

    def branches(self) -> dict[str, str]:
        out = self.git("for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads")
        return dict(line.split(" ", 1) for line in out.splitlines() if line)

    def read(self, ref: str, path: str) -> str | None:
        """The text of ``path`` at ``ref``; None when it is not a file there."""
        kind = self.git("cat-file", "-t", f"{ref}:{path}", check=False)
        if kind != "blob":
            return None
        return self.git("cat-file", "blob", f"{ref}:{path}") + "\n"

    def list_dir(self, ref: str, path: str) -> list[tuple[str, str, int]] | None:
        """``(name, "file"|"dir"|"symlink"|"submodule", size)`` of a directory at ``ref``; None when
        it is not one."""
        spec = f"{ref}:{path}" if path else f"{ref}^{{tree}}"
        if self.git("cat-file", "-t", spec, check=False) != "tree":
            return None
        out = self.git("ls-tree", "-l", spec)
        kinds = {"040000": "dir", "120000": "symlink", "160000": "submodule"}
        items = []
        for line in out.splitlines():
            meta, name = line.split("\t", 1)
            mode, _kind, _sha, size = meta.split()
            items.append((name, kinds.get(mode, "file"), int(size) if size.isdigit() else 0))
        return items

    def changed_files(self, base: str, head: str) -> list[ChangedFile]:
        merge_base = self.git("merge-base", base, head, check=False) or base
        stats = self.git("diff", "--numstat", merge_base, head).splitlines()
        statuses = {
            line.split("\t", 1)[1]: line.split("\t", 1)[0]
            for line in self.git("diff", "--name-status", merge_base, head).splitlines()
            if "\t" in line
        }
        names = {"A": "added", "M": "modified", "D": "removed"}
        files = []
        for line in stats:
            added, deleted, name = line.split("\t", 2)
            patch = self.git("diff", merge_base, head, "--", name)
            hunks = patch[patch.find("@@") :] if "@@" in patch else ""
            files.append(
                ChangedFile(
                    name,
                    names.get(statuses.get(name, "M")[:1], "modified"),
                    int(added) if added.isdigit() else 0,
                    int(deleted) if deleted.isdigit() else 0,
                    hunks,
                )
            )
        return files

    def conflicts(self, base: str, head: str) -> bool:
        """Whether merging ``head`` into ``base`` conflicts (computed without a working tree)."""
        done = subprocess.run(
            ["git", "merge-tree", "--write-tree", base, head],
            cwd=self.path,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **IDENTITY},
            capture_output=True,
            text=True,
            check=False,
        )
        return done.returncode != 0

    # --- writes ------------------------------------------------------------------------------

    def merge(self, base_branch: str, head: str, *, method: str, message: str) -> str:
        """Merge ``head`` into ``base_branch`` (merge: two parents; squash and rebase: one); the new sha."""
        base = self.sha(f"refs/heads/{base_branch}")
        if base is None:
            raise GitStoreError(f"no branch {base_branch}")
        tree = self.git("merge-tree", "--write-tree", base, head).splitlines()[0]
        parents = ["-p", base, "-p", head] if method == "merge" else ["-p", base]
        commit = self.git("commit-tree", tree, *parents, "-m", message)
        self.git("update-ref", f"refs/heads/{base_branch}", commit, base)
        return commit

    def revert(self, onto: str, commit: str, *, branch: str, message: str) -> str:
        """A new ``branch`` off ``onto`` whose one commit undoes ``commit`` (against its first
        parent, as ``git revert -m 1``); its sha. GitStoreError when the revert conflicts with
        what ``onto`` holds now or ``branch`` exists already."""
        base = self.sha(f"refs/heads/{onto}")
        if base is None:
            raise GitStoreError(f"no branch {onto}")
        parent = self.git("rev-parse", f"{commit}^1")
        # The undoing commit on top of ``commit``, merged onto ``onto``: its merge base is ``commit``.
        undo = self.git("commit-tree", f"{parent}^{{tree}}", "-p", commit, "-m", message)
        if self.conflicts(base, undo):
            raise GitStoreError(f"reverting {commit[:12]} conflicts with {onto}")
        tree = self.git("merge-tree", "--write-tree", base, undo).splitlines()[0]
        made = self.git("commit-tree", tree, "-p", base, "-m", message)
        self.git("update-ref", f"refs/heads/{branch}", made, "0" * 40)  # refused if it exists
        return made

    def delete_branch(self, branch: str) -> bool:
        if self.sha(f"refs/heads/{branch}") is None:
            return False
        self.git("update-ref", "-d", f"refs/heads/{branch}")
        return True
