"""Reading ``.squadron/``: from a repository's default branch (cached per commit) or from a directory.

Configuration is read from the default branch only, so a pull request cannot
loosen the policy that reviews it (Probot, Mergify do the same). A repository
without ``.squadron/`` gets the documented defaults and the built-in agents.

Both sources go through one function, :func:`gather`, so ``squadron validate``
and the router agree on every file: which ones are configuration, that a
symbolic link is refused (GitHub's contents API lists a link as ``symlink``; a
directory has ``lstat``), the size and count limits (checked on the listing,
before anything is read), and that every file is UTF-8 text. Each refusal is a
:class:`~squadron.domain.repo_config.errors.Problem` naming the file.
"""

from __future__ import annotations

import codecs
import logging
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from squadron.config.parse import SquadronConfig, parse_files
from squadron.domain.repo_config.constants import AGENTS_DIR, CONFIG_DIR
from squadron.domain.repo_config.errors import ConfigError, Problem
from squadron.domain.repo_config.limits import MAX_FILE_BYTES, MAX_FILES, MAX_TOTAL_BYTES
from squadron.domain.repo_config.models import RepoConfig
from squadron.errors import FileTooLargeError

#: Sub-directories of .squadron/ whose files are configuration (schemas/ is generated, not read).
_CONFIG_FOLDERS = ("", AGENTS_DIR, "workflows")
_SUFFIXES = (".yaml", ".yml", ".md")

#: What a symbolic link is told, by ``squadron validate`` and on the default branch alike.
SYMLINK_PROBLEM = (
    "is a symbolic link: configuration is read only from regular files inside .squadron/ "
    "(a link could point anywhere); replace it with the file itself"
)

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


# --- what a source says about a path ---------------------------------------------------------

EntryKind = Literal["file", "dir", "symlink", "other"]


@dataclass(frozen=True)
class Entry:
    """One entry of a directory: its name, what it is, and its size when the listing says."""

    name: str
    kind: EntryKind
    size: int | None = None


@dataclass(frozen=True)
class Listing:
    """What is at a path: a directory (with its entries), nothing, or something that is no directory."""

    kind: Literal["dir", "absent", "file", "symlink", "other"]
    entries: tuple[Entry, ...] = ()


ABSENT = Listing("absent")


class RepositoryFiles(Protocol):
    """The three reads the loader needs from GitHub (the contents API), and nothing else."""

    def default_branch_head(self, repo: str) -> tuple[str, str]:
        """(default branch name, head commit sha) of ``repo`` (``owner/name``)."""
        ...

    def list_dir(self, repo: str, path: str, ref: str) -> Listing:
        """What is at ``path`` at ``ref``: a directory's entries (links as ``symlink``), or what else."""
        ...

    def read_bytes(self, repo: str, path: str, ref: str, *, limit: int) -> bytes | None:
        """The bytes of the regular file at ``path`` and ``ref``, or None if there is none.

        Raises :class:`~squadron.errors.FileTooLargeError` rather than read more than ``limit``.
        """
        ...


# --- one way to gather the files, whatever the source ----------------------------------------


def gather(
    list_dir: Callable[[str], Listing],
    read: Callable[[str, int], bytes | None],
    *,
    root: str = CONFIG_DIR,
) -> tuple[dict[str, str], list[Problem]]:
    """The configuration files as {path relative to .squadron: text}, and what was refused.

    ``list_dir`` and ``read`` take paths relative to the ``.squadron`` directory ("" is the
    directory itself); ``root`` names it in problems.
    """
    candidates, problems = _candidates(list_dir, root)
    if len(candidates) > MAX_FILES:
        problems.append(
            Problem(
                root,
                None,
                "",
                f"{len(candidates)} configuration files, over the limit of {MAX_FILES} (MAX_FILES)",
            )
        )
        return {}, problems
    texts, refused = _read_all(candidates, read, root)
    return texts, problems + refused


def _candidates(
    list_dir: Callable[[str], Listing], root: str
) -> tuple[list[tuple[str, Entry]], list[Problem]]:
    """The regular files that are configuration, from the listings alone; links refused."""
    top = list_dir("")
    if top.kind == "absent":
        return [], []
    if top.kind != "dir":
        return [], [
            Problem(root, None, "", SYMLINK_PROBLEM if top.kind == "symlink" else "is not a directory")
        ]
    problems: list[Problem] = []
    candidates: list[tuple[str, Entry]] = []
    for folder in _CONFIG_FOLDERS:
        entries = top.entries
        if folder:
            entry = next((e for e in top.entries if e.name == folder), None)
            if entry is None or entry.kind in ("file", "other"):
                continue
            listing = list_dir(folder) if entry.kind == "dir" else Listing("symlink")
            if listing.kind == "symlink":
                problems.append(Problem(f"{root}/{folder}", None, "", SYMLINK_PROBLEM))
            if listing.kind != "dir":
                continue
            entries = listing.entries
        for entry in sorted(entries, key=lambda e: e.name):
            if not entry.name.endswith(_SUFFIXES) or entry.kind == "dir":
                continue
            rel = f"{folder}/{entry.name}".lstrip("/")
            if entry.kind == "symlink":
                problems.append(Problem(f"{root}/{rel}", None, "", SYMLINK_PROBLEM))
            elif entry.kind == "other":
                problems.append(Problem(f"{root}/{rel}", None, "", "is not a regular file"))
            else:
                candidates.append((rel, entry))
    return candidates, problems


def _read_all(
    candidates: list[tuple[str, Entry]], read: Callable[[str, int], bytes | None], root: str
) -> tuple[dict[str, str], list[Problem]]:
    """Read each candidate within the size limits (a listed size over them is not even read)."""
    texts: dict[str, str] = {}
    problems: list[Problem] = []
    total = 0
    for rel, entry in candidates:
        file = f"{root}/{rel}"
        if entry.size is not None and entry.size > MAX_FILE_BYTES:
            problems.append(Problem(file, None, "", _too_large(entry.size)))
            continue
        try:
            data = read(rel, MAX_FILE_BYTES)
        except FileTooLargeError as exc:
            problems.append(Problem(file, None, "", _too_large(exc.size)))
            continue
        except OSError as exc:  # a directory's file that cannot be opened
            problems.append(Problem(file, None, "", f"cannot be read: {exc.strerror or exc}"))
            continue
        if data is None:
            problems.append(Problem(file, None, "", "is not a regular file"))
            continue
        if len(data) > MAX_FILE_BYTES:
            problems.append(Problem(file, None, "", _too_large(len(data))))
            continue
        total += len(data)
        if total > MAX_TOTAL_BYTES:
            problems.append(
                Problem(
                    file,
                    None,
                    "",
                    f"the configuration files up to this one are {total} bytes, over the limit of "
                    f"{MAX_TOTAL_BYTES} for all of them (MAX_TOTAL_BYTES)",
                )
            )
            break
        text = decode_text(data, file)
        if isinstance(text, Problem):
            problems.append(text)
        else:
            texts[rel] = text
    return texts, problems


def _too_large(size: int) -> str:
    return f"is {size} bytes, over the limit of {MAX_FILE_BYTES} for one file (MAX_FILE_BYTES)"


def decode_text(data: bytes, file: str) -> str | Problem:
    """``data`` as UTF-8 text (a leading byte order mark dropped), or where it is not."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        hint = " (it looks like UTF-16)" if data[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE) else ""
        return Problem(
            file,
            line,
            "",
            f"is not UTF-8 text: byte 0x{data[exc.start]:02x} at column {column} is not valid UTF-8{hint}; "
            "save the file as UTF-8",
        )


def _checked(files: Mapping[str, str], problems: list[Problem], root: str) -> SquadronConfig:
    """Parse what was read; a refused file is a problem even when the rest parses."""
    if not problems:
        return parse_files(files, root=root)
    try:
        parse_files(files, root=root)
    except ConfigError as exc:
        problems = [*problems, *exc.problems]
    raise ConfigError(problems)


# --- the default branch -----------------------------------------------------------------------


class ConfigLoader:
    """Loads a repository's configuration at its default branch head, parsed once per commit.

    Parsed configurations — and configuration errors, which are as stable as a
    commit — are kept in a bounded LRU keyed by (repository, commit sha). Reading
    from GitHub may fail (and is retried by whoever asked); once the files are read,
    nothing about them raises anything but a :class:`ConfigError`.
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

    def head(self, repo: str) -> tuple[str, str]:
        """(default branch, head commit sha) of ``repo``: one request, never cached."""
        return self._files.default_branch_head(repo)

    def load(self, repo: str) -> SquadronConfig:
        """The configuration on ``repo``'s default branch; raises ConfigError if it is invalid."""
        _branch, sha = self.head(repo)
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
        def list_dir(rel: str) -> Listing:
            return self._files.list_dir(repo, f"{CONFIG_DIR}/{rel}".rstrip("/"), sha)

        def read(rel: str, limit: int) -> bytes | None:
            return self._files.read_bytes(repo, f"{CONFIG_DIR}/{rel}", sha, limit=limit)

        texts, problems = gather(list_dir, read)
        try:
            config = _checked(texts, problems, CONFIG_DIR)
        except ConfigError as exc:
            return exc
        except Exception as exc:  # a bug of the parser must pause one repository, not poison the queue
            logger.exception("parsing the configuration of %s at %s failed", repo, sha)
            return ConfigError(
                [Problem(CONFIG_DIR, None, "", f"could not be parsed ({type(exc).__name__}: {exc})"[:500])]
            )
        return with_bot_login(config, self.bot_login).model_copy(update={"commit_sha": sha})


# --- a directory (squadron validate) ----------------------------------------------------------


def _local_listing(path: Path) -> Listing:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return ABSENT
    if stat.S_ISLNK(info.st_mode):
        return Listing("symlink")
    if not stat.S_ISDIR(info.st_mode):
        return Listing("file" if stat.S_ISREG(info.st_mode) else "other")
    entries = []
    with os.scandir(path) as found:
        for item in found:
            child = item.stat(follow_symlinks=False)
            kind: EntryKind = (
                "symlink"
                if stat.S_ISLNK(child.st_mode)
                else "dir"
                if stat.S_ISDIR(child.st_mode)
                else "file"
                if stat.S_ISREG(child.st_mode)
                else "other"
            )
            entries.append(Entry(item.name, kind, child.st_size if kind == "file" else None))
    return Listing("dir", tuple(entries))


def _local_read(path: Path, limit: int) -> bytes:
    # O_NOFOLLOW: a file swapped for a link after the listing is refused, not followed;
    # O_NONBLOCK: a FIFO swapped in is not waited on.
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(0, "not a regular file")
        return handle.read(limit + 1)


def read_directory(directory: Path, *, root: str | None = None) -> dict[str, str]:
    """The configuration files under ``directory`` (a ``.squadron``), as {relative path: text}.

    Raises :class:`ConfigError` naming every file refused (links, sizes, encodings).
    """
    texts, problems = gather(
        lambda rel: _local_listing(directory / rel if rel else directory),
        lambda rel, limit: _local_read(directory / rel, limit),
        root=root if root is not None else directory.as_posix(),
    )
    if problems:
        raise ConfigError(problems)
    return texts


def load_directory(directory: Path, *, root: str | None = None) -> SquadronConfig:
    """Parse the ``.squadron`` directory at ``directory``; problems name files under ``root``."""
    name = root if root is not None else directory.as_posix()
    texts, problems = gather(
        lambda rel: _local_listing(directory / rel if rel else directory),
        lambda rel, limit: _local_read(directory / rel, limit),
        root=name,
    )
    return _checked(texts, problems, name)
