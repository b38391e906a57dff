"""What an attacker obtained: the secrets found in files it copied out, git objects included."""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path


def readable(data: bytes) -> Iterator[bytes]:
    """``data`` and every zlib stream in it (a loose object is one; a pack holds one per object)."""
    yield data
    for start in range(len(data)):
        if data[start] != 0x78:  # zlib's header byte at git's levels
            continue
        with contextlib.suppress(zlib.error):
            yield zlib.decompressobj().decompress(data[start:], 1 << 20)


def secrets_in(where: Path, secrets: Iterable[str]) -> set[str]:
    """Which of ``secrets`` the files under ``where`` hold (links are not followed)."""
    wanted = [secret.encode() for secret in secrets]
    found: set[str] = set()
    for path in [where, *(where.rglob("*") if where.is_dir() and not where.is_symlink() else [])]:
        if not path.is_file() or path.is_symlink():
            continue
        for blob in readable(path.read_bytes()):
            found |= {secret.decode() for secret in wanted if secret in blob}
    return found
