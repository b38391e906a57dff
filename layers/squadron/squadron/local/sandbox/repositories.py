"""Repositories, branches, branch protection, contents, collaborators' permissions, refs.

Contents are read from the repository's real bare git store (:mod:`squadron.local.git_store`).
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any
from urllib.parse import unquote

from squadron.local.sandbox.base import ApiError, Json, SandboxBase


class RepositoryOps(SandboxBase):
    def _op_repos__get(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        return 200, self.repository(self._repo(params))

    def _op_repos__list_branches(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        return 200, [
            {"name": n, "commit": {"sha": s}, "protected": n in repo.protections}
            for n, s in sorted(repo.store.branches().items())
        ]

    def _op_repos__get_branch(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        sha = repo.store.sha(f"refs/heads/{params['branch']}")
        if sha is None:
            raise ApiError(404, "Branch not found")
        return 200, {
            "name": params["branch"],
            "commit": {"sha": sha},
            "protected": params["branch"] in repo.protections,
        }

    def _op_repos__update_branch_protection(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        repo = self._repo(params)
        if repo.permissions.get(caller) != "admin":
            raise ApiError(
                403,
                "Resource not accessible by integration"
                if caller.endswith("[bot]")
                else "Must have admin rights to Repository.",
            )
        repo.protections[params["branch"]] = body
        return 200, body

    def _op_repos__get_content(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        ref = query.get("ref") or repo.default_branch
        path = unquote(params["path"]).strip("/")
        text = repo.store.read(ref, path)
        if text is not None:
            data = text.encode()
            sha = hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
            return 200, {
                "type": "file",
                "name": path.rsplit("/", 1)[-1],
                "path": path,
                "sha": sha,
                "size": len(data),
                "encoding": "base64",
                "content": base64.b64encode(data).decode(),
            }
        listing = repo.store.list_dir(ref, path)
        if listing is None:
            raise ApiError(404, "Not Found")
        return 200, [
            # GitHub lists a submodule as a "file" (for compatibility), and a link as a "symlink".
            {
                "type": "file" if kind == "submodule" else kind,
                "name": name,
                "path": f"{path}/{name}".strip("/"),
                "size": size,
            }
            for name, kind, size in listing
        ]

    def _op_repos__get_collaborator_permission_level(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        repo = self._repo(params)
        permission = repo.permissions.get(params["username"], "read")
        return 200, {
            "permission": "write" if permission == "maintain" else permission,
            "role_name": permission,
            "user": self.user(params["username"]),
        }

    def _op_git__delete_ref(self, params: Json, query: Json, body: Json, caller: str) -> tuple[int, Any]:
        repo = self._repo(params)
        ref = unquote(params["ref"]).removeprefix("heads/")
        if not repo.store.delete_branch(ref):
            raise ApiError(422, "Reference does not exist")
        return 204, None
