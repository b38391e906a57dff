"""An in-memory repository for the configuration loader (the RepositoryFiles port)."""

from __future__ import annotations

from collections import Counter


class FakeRepositoryFiles:
    """A repository whose default branch moves between commits; counts every call."""

    def __init__(self) -> None:
        self.commits: dict[str, dict[str, str]] = {}
        self.head: dict[str, str] = {}
        self.calls: Counter[str] = Counter()

    def commit(self, repo: str, sha: str, squadron_files: dict[str, str]) -> None:
        self.commits[sha] = {f".squadron/{rel}": text for rel, text in squadron_files.items()}
        self.head[repo] = sha

    def default_branch_head(self, repo: str) -> tuple[str, str]:
        self.calls["default_branch_head"] += 1
        return "main", self.head[repo]

    def list_dir(self, repo: str, path: str, ref: str) -> list[str]:
        self.calls["list_dir"] += 1
        prefix = path.rstrip("/") + "/"
        return sorted(
            name.removeprefix(prefix)
            for name in self.commits[ref]
            if name.startswith(prefix) and "/" not in name.removeprefix(prefix)
        )

    def read_text(self, repo: str, path: str, ref: str) -> str | None:
        self.calls["read_text"] += 1
        return self.commits[ref].get(path)
