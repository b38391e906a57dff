"""The sandbox's state on disk: a restart resumes where the sandbox stopped.

Everything but the git repositories (already on disk) is saved as one JSON file.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from squadron.local.git_store import GitStore
from squadron.local.sandbox.base import Delivery, Repo, SandboxBase


class SandboxState(SandboxBase):
    _SAVED = (
        "issues",
        "pulls",
        "comments",
        "reviews",
        "statuses",
        "check_runs",
        "protections",
        "permissions",
        "merge_queues",
        "queue",
    )

    def save(self, path: Path) -> None:
        """Everything but the git repositories (already on disk) as one JSON file."""
        with self._lock:
            next_id = next(self._ids)
            self._ids = itertools.count(next_id)
            state = {
                "next_id": next_id,
                "tokens": self.tokens,
                "token_scopes": self.token_scopes,
                "token_permissions": self.token_permissions,
                "repos": [
                    {
                        "id": r.id,
                        "owner": r.owner,
                        "name": r.name,
                        "default_branch": r.default_branch,
                        "installed": r.installed,
                        "private": r.private,
                        **{name: getattr(r, name) for name in self._SAVED},
                    }
                    for r in self.repos.values()
                ],
                "deliveries": [vars(d) for d in self.deliveries],
            }
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(state), encoding="utf-8")
        temporary.replace(path)

    def load(self, path: Path) -> None:
        """The state :meth:`save` wrote: its repositories (their git stores reopened) and deliveries."""
        state = json.loads(path.read_text(encoding="utf-8"))
        with self._lock:
            for saved in state["repos"]:
                owner, name = saved["owner"], saved["name"]
                store = GitStore(self.root / "git" / owner / f"{name}.git")
                if not store.path.is_dir():
                    raise FileNotFoundError(f"{store.path}: the saved repository's git store is missing")
                repo = Repo(
                    saved["id"],
                    owner,
                    name,
                    saved["default_branch"],
                    store,
                    installed=saved.get("installed", True),
                    private=saved.get("private", False),
                )
                for field_name in self._SAVED:
                    value = saved.get(field_name, {} if field_name != "queue" else [])
                    if field_name in ("issues", "pulls", "comments", "reviews"):
                        value = {int(k): v for k, v in value.items()}  # JSON keys are strings
                    setattr(repo, field_name, value)
                self.repos[repo.full_name] = repo
            self.deliveries = [Delivery(**d) for d in state["deliveries"]]
            self.tokens = dict(state["tokens"])
            self.token_scopes = dict(state.get("token_scopes") or {})
            self.token_permissions = dict(state.get("token_permissions") or {})
            self._ids = itertools.count(int(state["next_id"]))
