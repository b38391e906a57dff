"""The configuration benchmark measures what it says: the largest valid config the limits allow."""

from __future__ import annotations

from bench.config_validation import largest_config
from squadron.config import parse_files
from squadron.domain.repo_config.limits import MAX_FILE_BYTES, MAX_FILES, MAX_PATH_GLOBS, MAX_TOTAL_BYTES


def test_the_largest_config_is_at_the_limits_and_valid() -> None:
    files = largest_config()
    sizes = [len(text.encode()) for text in files.values()]
    assert len(files) == MAX_FILES
    assert max(sizes) <= MAX_FILE_BYTES and max(sizes) > MAX_FILE_BYTES - 200
    assert MAX_TOTAL_BYTES - 4096 < sum(sizes) <= MAX_TOTAL_BYTES
    config = parse_files(files)
    assert sum(len(p.paths) for p in config.approval_flows.default.protected_paths) == MAX_PATH_GLOBS
