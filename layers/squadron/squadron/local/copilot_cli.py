"""Where this repository keeps the Copilot CLI, and unpacking its package once for every agent's user.

The CLI unpacks itself into ``$XDG_CACHE_HOME/copilot`` on first run (~235 MB). Agents' CLIs run
as their own users and only read that cache, so it is unpacked once by the framework's own user
first (in the image this happens at build time).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def cli_paths(root: Path) -> tuple[Path, Path]:
    """(the Copilot CLI binary npm installed, the package cache the tests and local stack share)."""
    return (
        root / "node_modules" / "@github" / "copilot-linux-x64" / "copilot",
        root / "tests" / ".cache" / "copilot-xdg",
    )


def unpack_cli(cli: Path, cache: Path) -> None:
    """Unpack the CLI's package into ``cache`` (quick when it is there already)."""
    if not cli.exists():
        raise FileNotFoundError(f"{cli} is missing: run `make setup` (npm ci installs @github/copilot)")
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [str(cli), "--version"],
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(cache),
            "XDG_CACHE_HOME": str(cache),
        },
        capture_output=True,
        check=True,
        timeout=600,
    )
