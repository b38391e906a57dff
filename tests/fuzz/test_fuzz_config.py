"""Fuzzing .squadron/: whatever the bytes, a configuration or a ConfigError naming its file."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from squadron.config import ConfigError, ConfigLoader
from squadron.domain.approval import effective_flow
from tests.fuzz import CPU_SECONDS, DEADLINE_SECONDS, FUZZ, MEMORY_MIB
from tests.fuzz.strategies import agent_files, globs, hostile_yaml, paths
from tests.support.bounded import run_bounded
from tests.support.repo_files import FakeRepositoryFiles


def _load(files: dict[str, bytes]) -> str:
    """What the router's loader says of ``files`` (the child's answer: never an exception)."""
    repository = FakeRepositoryFiles()
    repository.commit("octo/app", "sha1", dict(files))
    try:
        ConfigLoader(repository).load("octo/app")
    except ConfigError as exc:
        unnamed = [str(p) for p in exc.problems if not p.file.startswith(".squadron")]
        assert not unnamed, unnamed
        crashed = [str(p) for p in exc.problems if p.message.startswith("could not be parsed (")]
        assert not crashed, crashed  # the loader's last resort caught a parser bug
        return f"refused ({len(exc.problems)} problems)"
    return "valid"


def _bounded(files: dict[str, bytes]) -> None:
    outcome = run_bounded(_load, files, memory_mib=MEMORY_MIB, deadline=DEADLINE_SECONDS)
    assert outcome.how == "returned", outcome.value
    assert outcome.cpu_seconds < CPU_SECONDS, outcome


@FUZZ
@given(hostile_yaml())
def test_any_config_yaml(data: bytes) -> None:
    _bounded({"config.yaml": data})


@FUZZ
@given(agent_files())
def test_any_agent_definition(data: bytes) -> None:
    _bounded({"agents/pm.md": data})


@FUZZ
@given(hostile_yaml())
def test_any_approval_flows(data: bytes) -> None:
    _bounded({"workflows/approval-flows.yaml": data})


def _flows_and_paths(patterns: list[str], branch: str, changed: list[str]) -> str:
    text = "default:\n  protected_paths:\n" + "".join(
        f"    - {{paths: [{_quoted(p)}], require_human: true}}\n" for p in patterns
    )
    text += "branch_rules:\n" + "".join(f"  - {{pattern: {_quoted(p)}}}\n" for p in patterns[:5])
    repository = FakeRepositoryFiles()
    repository.commit("octo/app", "sha1", {"workflows/approval-flows.yaml": text})
    try:
        flows = ConfigLoader(repository).load("octo/app").approval_flows
    except ConfigError:
        return "refused"
    effective = effective_flow(flows, branch, changed)
    return f"{len(effective.added_by)} protected paths touched"


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@FUZZ
@given(st.lists(globs, min_size=1, max_size=8), paths, st.lists(paths, max_size=20))
def test_any_globs_against_any_changed_files(patterns: list[str], branch: str, changed: list[str]) -> None:
    outcome = run_bounded(
        _flows_and_paths, patterns, branch, changed, memory_mib=MEMORY_MIB, deadline=DEADLINE_SECONDS
    )
    assert outcome.how == "returned", outcome.value
    assert outcome.cpu_seconds < CPU_SECONDS, outcome
