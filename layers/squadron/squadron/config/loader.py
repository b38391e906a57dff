"""Reading ``.squadron/``: from a repository's default branch (cached per commit) or from a directory.

Configuration is read from the default branch only, so a pull request cannot
loosen the policy that reviews it (Probot, Mergify do the same). A repository
without ``.squadron/`` gets the documented defaults and the built-in agents.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Protocol

from squadron.config.constants import AGENTS_DIR, CONFIG_DIR
from squadron.config.errors import ConfigError
from squadron.config.models import RepoConfig
from squadron.config.parse import SquadronConfig, parse_files

#: Sub-directories of .squadron/ whose files are configuration (schemas/ is generated, not read).
_CONFIG_FOLDERS = ("", AGENTS_DIR, "workflows")
_SUFFIXES = (".yaml", ".yml", ".md")

logger = logging.getLogger(__name__)


def with_bot_login(config: SquadronConfig, bot_login: str | None) -> SquadronConfig:
    """``config`` acting as the App whose login is ``bot_login`` (None: as its config.yaml says).

    The App's login is a fact of the deployment (its slug), not of a repository: a deployed
    component passes it, and it wins over ``bot_login`` in config.yaml, whose default
    (``squadron[bot]``) is only right for an App named squadron.
    """
    if bot_login is None or config.config.bot_login == bot_login:
        return config
    if config.config.bot_login != RepoConfig.model_fields["bot_login"].default:  # written in config.yaml
        logger.warning(
            "bot_login %s in .squadron/config.yaml is not the App's login %s: the App's is used",
            config.config.bot_login,
            bot_login,
        )
    return config.model_copy(update={"config": config.config.model_copy(update={"bot_login": bot_login})})


class RepositoryFiles(Protocol):
    """The three reads the loader needs from GitHub (the contents API), and nothing else."""

    def default_branch_head(self, repo: str) -> tuple[str, str]:
        """(default branch name, head commit sha) of ``repo`` (``owner/name``)."""
        ...

    def list_dir(self, repo: str, path: str, ref: str) -> list[str]:
        """Names of the files (not sub-directories) directly in ``path`` at ``ref``; [] if it does not exist."""
        ...

    def read_text(self, repo: str, path: str, ref: str) -> str | None:
        """The UTF-8 text of the file at ``path`` and ``ref``, or None if there is none."""
        ...


class ConfigLoader:
    """Loads a repository's configuration at its default branch head, parsed once per commit.

    Parsed configurations — and configuration errors, which are as stable as a
    commit — are kept in a bounded LRU keyed by (repository, commit sha).
    """

    def __init__(
        self, files: RepositoryFiles, *, max_entries: int = 64, bot_login: str | None = None
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        #: The App's login (``<slug>[bot]``) every loaded configuration acts as; None: config.yaml's.
        self.bot_login = bot_login
        self._files = files
        self._max_entries = max_entries
        self._cache: OrderedDict[tuple[str, str], SquadronConfig | ConfigError] = OrderedDict()
        self._lock = threading.Lock()

    def load(self, repo: str) -> SquadronConfig:
        """The configuration on ``repo``'s default branch; raises ConfigError if it is invalid."""
        _branch, sha = self._files.default_branch_head(repo)
        return self.load_at(repo, sha)

    def load_at(self, repo: str, sha: str) -> SquadronConfig:
        """The configuration at commit ``sha`` (callers pass a default-branch commit)."""
        key = (repo, sha)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
        if cached is None:
            cached = self._parse(repo, sha)
            with self._lock:
                self._cache[key] = cached
                self._cache.move_to_end(key)
                while len(self._cache) > self._max_entries:
                    self._cache.popitem(last=False)
        if isinstance(cached, ConfigError):
            raise cached
        return cached

    def _parse(self, repo: str, sha: str) -> SquadronConfig | ConfigError:
        texts: dict[str, str] = {}
        for folder in _CONFIG_FOLDERS:
            path = f"{CONFIG_DIR}/{folder}".rstrip("/")
            for name in self._files.list_dir(repo, path, sha):
                if name.endswith(_SUFFIXES):
                    text = self._files.read_text(repo, f"{path}/{name}", sha)
                    if text is not None:
                        texts[f"{folder}/{name}".lstrip("/")] = text
        try:
            config = parse_files(texts)
        except ConfigError as exc:
            return exc
        return with_bot_login(config, self.bot_login).model_copy(update={"commit_sha": sha})


def read_directory(directory: Path) -> dict[str, str]:
    """The configuration files under ``directory`` (a ``.squadron``), as {relative path: text}."""
    texts: dict[str, str] = {}
    for folder in _CONFIG_FOLDERS:
        base = directory / folder if folder else directory
        if not base.is_dir():
            continue
        for path in sorted(base.iterdir()):
            if path.is_file() and path.name.endswith(_SUFFIXES):
                texts[path.relative_to(directory).as_posix()] = path.read_text(encoding="utf-8")
    return texts


def load_directory(directory: Path, *, root: str | None = None) -> SquadronConfig:
    """Parse the ``.squadron`` directory at ``directory``; problems name files under ``root``."""
    return parse_files(read_directory(directory), root=root if root is not None else directory.as_posix())
