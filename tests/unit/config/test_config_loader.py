"""Loading from the default branch through RepositoryFiles: cached per commit sha."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from squadron.config import ConfigError, ConfigLoader, read_directory
from tests.support.repo_files import FakeRepositoryFiles

REFERENCE = Path(__file__).resolve().parents[3] / ".squadron"


def test_loads_the_reference_config_from_the_default_branch() -> None:
    files = FakeRepositoryFiles()
    files.commit("octo/app", "sha1", read_directory(REFERENCE))

    config = ConfigLoader(files).load("octo/app")

    assert config.commit_sha == "sha1"
    assert set(config.config.roles) == {
        "pm",
        "feat-dev",
        "bug-fix",
        "pr-review",
        "security-review",
        "retrospective",
    }
    assert config.agents["pm"].source == ".squadron/agents/pm.md"
    assert config.approval_flows.branch_rules[0].pattern == "main"


def test_parsed_once_per_commit_sha() -> None:
    files = FakeRepositoryFiles()
    files.commit("octo/app", "sha1", read_directory(REFERENCE))
    loader = ConfigLoader(files)

    first = loader.load("octo/app")
    reads = files.calls["read_text"]
    second = loader.load("octo/app")

    assert second is first
    assert files.calls["read_text"] == reads
    assert files.calls["default_branch_head"] == 2  # the head is asked every time

    files.commit("octo/app", "sha2", {"config.yaml": "max_issue_depth: 5\n"})
    third = loader.load("octo/app")

    assert third.commit_sha == "sha2" and third.config.max_issue_depth == 5
    assert files.calls["read_text"] == reads + 1


def test_cache_is_a_bounded_lru() -> None:
    files = FakeRepositoryFiles()
    for sha in ("a", "b", "c"):
        files.commit("octo/app", sha, {})
    loader = ConfigLoader(files, max_entries=2)

    loader.load_at("octo/app", "a")
    loader.load_at("octo/app", "b")
    loader.load_at("octo/app", "a")  # a is now the most recent
    loader.load_at("octo/app", "c")  # evicts b
    lists = files.calls["list_dir"]
    loader.load_at("octo/app", "a")
    assert files.calls["list_dir"] == lists
    loader.load_at("octo/app", "b")
    assert files.calls["list_dir"] > lists


def test_missing_squadron_directory_gives_documented_defaults() -> None:
    files = FakeRepositoryFiles()
    files.commit("octo/empty", "sha1", {})

    config = ConfigLoader(files).load("octo/empty")

    assert config.uses_defaults_only
    assert files.calls["read_text"] == 0


def test_invalid_config_is_an_error_cached_per_sha() -> None:
    files = FakeRepositoryFiles()
    files.commit("octo/app", "bad", {"config.yaml": "roles:\n  pm: {kind: boss}\n"})
    loader = ConfigLoader(files)

    for _ in range(2):
        with pytest.raises(ConfigError) as caught:
            loader.load("octo/app")
        assert caught.value.problems[0].file == ".squadron/config.yaml"
        assert caught.value.problems[0].line == 2
    assert files.calls["read_text"] == 1


def test_only_configuration_files_are_read() -> None:
    files = FakeRepositoryFiles()
    files.commit(
        "octo/app", "sha1", {"config.yaml": "", "schemas/config.schema.json": "{}", "notes.txt": "x"}
    )

    ConfigLoader(files).load("octo/app")

    assert files.calls["read_text"] == 1


def test_max_entries_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_entries"):
        ConfigLoader(FakeRepositoryFiles(), max_entries=0)


def test_config_package_imports_neither_boto3_nor_httpx() -> None:
    code = "import sys, squadron.config, squadron.cli; print(sorted(m for m in ('boto3', 'httpx') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert result.stdout.strip() == "[]"
