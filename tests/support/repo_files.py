"""An in-memory repository for the configuration loader (the RepositoryFiles port).

Entries are text, bytes, or a :class:`Link` (a symbolic link, listed as GitHub's contents
API lists one). Paths are under the repository root; directories exist by containing files.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from squadron.config.loader import ABSENT, Entry, Listing
from squadron.errors import FileTooLargeError


@dataclass(frozen=True)
class Link:
    """A symbolic link to ``target``."""

    target: str


Content = str | bytes | Link


class FakeRepositoryFiles:
    """A repository whose default branch moves between commits; counts every call."""

    def __init__(self) -> None:
        self.commits: dict[str, dict[str, Content]] = {}
        self.head: dict[str, str] = {}
        self.calls: Counter[str] = Counter()

    def commit(self, repo: str, sha: str, squadron_files: Mapping[str, Content]) -> None:
        """Commit ``.squadron/`` as {path relative to it: content} ("" is .squadron itself)."""
        self.commits[sha] = {
            f".squadron/{rel}".rstrip("/"): content for rel, content in squadron_files.items()
        }
        self.head[repo] = sha

    def default_branch_head(self, repo: str) -> tuple[str, str]:
        self.calls["default_branch_head"] += 1
        return "main", self.head[repo]

    def list_dir(self, repo: str, path: str, ref: str) -> Listing:
        self.calls["list_dir"] += 1
        files = self.commits[ref]
        if path in files:
            return Listing("symlink" if isinstance(files[path], Link) else "file")
        prefix = path.rstrip("/") + "/"
        entries: dict[str, Entry] = {}
        for name, content in files.items():
            if not name.startswith(prefix):
                continue
            first, _, rest = name.removeprefix(prefix).partition("/")
            if rest:
                entries[first] = Entry(first, "dir")
            elif isinstance(content, Link):
                entries[first] = Entry(first, "symlink", len(content.target))
            else:
                size = len(content.encode() if isinstance(content, str) else content)
                entries[first] = Entry(first, "file", size)
        return Listing("dir", tuple(sorted(entries.values(), key=lambda e: e.name))) if entries else ABSENT

    def read_bytes(self, repo: str, path: str, ref: str, *, limit: int) -> bytes | None:
        self.calls["read_text"] += 1
        content = self.commits[ref].get(path)
        if content is None or isinstance(content, Link):
            return None
        data = content.encode() if isinstance(content, str) else content
        if len(data) > limit:
            raise FileTooLargeError(path, len(data), limit)
        return data
