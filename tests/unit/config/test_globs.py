"""Glob matching: the meanings the configuration always had, in linear time.

The two dialects are checked against oracles that define them: the regular
expressions path globs were translated to before (kept here, compiled by ``re``)
and :func:`fnmatch.fnmatchcase` for branch patterns. Then the attacker's globs
and file names, which backtracking engines take exponential time over, are
answered in a bounded child within a second of CPU.
"""

from __future__ import annotations

import fnmatch
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from squadron.domain.repo_config.globs import compile_glob, fnmatch_matches, path_matches
from tests.support.bounded import run_bounded


def _old_glob_to_regex(glob: str) -> re.Pattern[str]:
    """The translation path globs had before (with ``.`` matching a newline: see below)."""
    out = []
    i = 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def _old_path_matches(glob: str, path: str) -> bool:
    if "/" not in glob:
        return bool(_old_glob_to_regex(glob).fullmatch(path.rsplit("/", 1)[-1]))
    return bool(_old_glob_to_regex(glob).fullmatch(path))


GLOB_CHARS = st.sampled_from(list("ab/*?[]!-^\\.z\n"))
TEXT_CHARS = st.sampled_from(list("ab/-^[]!\\.z\n"))


@settings(max_examples=400, derandomize=True)
@given(st.text(GLOB_CHARS, max_size=10), st.text(TEXT_CHARS, max_size=12))
def test_path_globs_mean_what_they_meant(glob: str, path: str) -> None:
    assert path_matches(glob, path) == _old_path_matches(glob, path)


@settings(max_examples=400, derandomize=True)
@given(st.text(GLOB_CHARS, max_size=10), st.text(TEXT_CHARS, max_size=12))
def test_branch_patterns_mean_what_fnmatch_means(pattern: str, branch: str) -> None:
    assert fnmatch_matches(branch, pattern) == fnmatch.fnmatchcase(branch, pattern)


@pytest.mark.parametrize(
    ("pattern", "branch", "matches"),
    [
        ("release/*", "release/1.0/hotfix", True),
        ("release/[0-9]*", "release/2.x", True),
        ("release/[!0-9]*", "release/2.x", False),
        ("v[1-3].?", "v2.7", True),
        ("v[3-1]", "v2", False),
        ("[!]", "x", False),
        ("[]]", "]", True),
        ("[", "[", True),
        ("main", "mainline", False),
        ("*", "", True),
    ],
    ids=[
        "star-crosses-slash",
        "range",
        "negated-range",
        "range-and-any",
        "empty-range-never",
        "unclosed-negation-is-literal",
        "bracket-first-is-literal",
        "lone-bracket",
        "whole-name",
        "star-matches-empty",
    ],
)
def test_branch_pattern_classes(pattern: str, branch: str, matches: bool) -> None:
    assert fnmatch_matches(branch, pattern) is matches is fnmatch.fnmatchcase(branch, pattern)


@pytest.mark.parametrize(
    ("glob", "path"),
    [("infra/**", "infra/evil\nname.py"), ("**/secrets/**", "a\n/secrets/key"), ("*.pem", "key\n.pem")],
    ids=["tree", "any-depth", "basename"],
)
def test_a_newline_in_a_file_name_does_not_slip_past_a_protected_path(glob: str, path: str) -> None:
    """The regular expressions globs were once translated to did not let ``.`` match a newline."""
    assert path_matches(glob, path)


def _hostile_paths(glob: str, text: str) -> tuple[bool, bool]:
    return path_matches(glob, text), path_matches("**/" + glob, "dir/" * 200 + text)


def _hostile_branches(pattern: str, text: str) -> bool:
    return fnmatch_matches(text, pattern)


@pytest.mark.parametrize(
    ("glob", "text"),
    [
        ("*a" * 100 + "b", "a" * 20_000),
        ("**a" * 60 + "b", "a/" * 10_000),
        ("**/" * 50 + "x", "a/" * 10_000),
        ("?" * 250 + "*b", "a" * 20_000),
    ],
    ids=["stars", "double-stars", "any-dirs", "many-single"],
)
def test_backtracking_globs_answer_within_a_second(glob: str, text: str) -> None:
    paths = run_bounded(_hostile_paths, glob, text, memory_mib=128)
    branches = run_bounded(_hostile_branches, glob.replace("**", "*"), text, memory_mib=128)
    assert paths.how == branches.how == "returned", (paths, branches)
    assert paths.value == (False, False) and branches.value is False
    assert paths.cpu_seconds < 1.0 and branches.cpu_seconds < 1.0, (paths, branches)


def test_compiled_globs_are_shared() -> None:
    assert compile_glob("infra/**") is compile_glob("infra/**")


def test_what_compiled_globs_remember_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Globs and file names from many repositories cannot grow a long-lived router's memory:
    past the budget every compiled glob is forgotten, and matching is as right as before."""
    from squadron.domain.repo_config import globs  # noqa: PLC0415

    monkeypatch.setattr(globs, "MAX_REMEMBERED", 500)
    globs.forget()
    names = ["".join(chr(0x4E00 + (i * 7 + j) % 3000) for j in range(30)) for i in range(200)]
    for i, name in enumerate(names):
        pattern = f"*{name[i % 30]}*"
        assert path_matches(pattern, name) is True
        assert path_matches(pattern + "/x", name) is False
        assert globs.remembered() <= 500
    assert globs.compile_glob.cache_info().currsize < 400  # it was cleared on the way
