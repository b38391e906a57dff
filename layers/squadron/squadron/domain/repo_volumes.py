"""Where a repository's agents keep their files, and the names that keep repositories apart — pure.

One file system holds every repository's agents; a task sees only its own repository's part of
it. On AWS each repository has an EFS access point whose root directory is
``/repos/<repo id>`` (EFS creates it, owned by root, mode 0711: agents' users pass through it,
never list it) and a task definition of its own (``<family>-repo-<repo id>``) that mounts only
that access point, at the same path every task mounts its volume (RunTask cannot override
volumes, so the task definition is the repository's). In the local stack each repository's
agents get ``<agents root>/repos/<repo id>`` as their root. A bug that names another agent's
directory then finds nothing of another repository's.

No POSIX user is enforced by the access point: it would replace every uid on the wire, the
agents' own and the host's, so agents of one repository would no longer be kept apart by
their own uids (each agent's directory is its own user's, mode 0700), and the host could not
hand a directory over.
"""

from __future__ import annotations

#: The directory under the file system's root (or the local agents root) holding every
#: repository's root.
REPOS_DIRECTORY = "repos"
#: Owner and mode of a repository's root as the access point creates it.
ROOT_OWNER_UID = 0
ROOT_OWNER_GID = 0
ROOT_PERMISSIONS = "711"
#: The tag that names an access point's or task definition's repository.
REPO_TAG = "squadron:repo"
#: Between the deployment's agent family and the repository id in a repository's family.
REPO_FAMILY_INFIX = "-repo-"
#: ECS: a task definition family is at most 255 letters, digits, hyphens and underscores.
_FAMILY_MAX = 255
#: EFS: a client token is at most 64 ASCII characters.
_TOKEN_MAX = 64


def _repo_id(repo_id: int) -> int:
    if isinstance(repo_id, bool) or not isinstance(repo_id, int) or repo_id <= 0:
        raise ValueError(f"not a repository id: {repo_id!r}")
    return repo_id


def repo_root_path(repo_id: int) -> str:
    """The repository's root on the file system (the access point's root directory)."""
    return f"/{REPOS_DIRECTORY}/{_repo_id(repo_id)}"


def repo_family(base_family: str, repo_id: int) -> str:
    """The repository's task definition family, derived from the deployment's agent family."""
    suffix = f"{REPO_FAMILY_INFIX}{_repo_id(repo_id)}"
    return f"{base_family[: _FAMILY_MAX - len(suffix)]}{suffix}"


def access_point_token(file_system_id: str, repo_id: int) -> str:
    """CreateAccessPoint's idempotency token: one access point per (file system, repository)."""
    return f"squadron-{file_system_id}-repo-{_repo_id(repo_id)}"[:_TOKEN_MAX]
