"""Fuzzing the glob matcher: any glob against any name answers, in linear time, as fnmatch would."""

from __future__ import annotations

import fnmatch

from hypothesis import given

from squadron.domain.repo_config.globs import fnmatch_matches, path_matches
from tests.fuzz import CPU_SECONDS, DEADLINE_SECONDS, FUZZ, MEMORY_MIB
from tests.fuzz.strategies import globs, paths
from tests.support.bounded import run_bounded


def _match(glob: str, path: str) -> tuple[bool, bool, bool | None]:
    # fnmatch itself (a regular expression) is only an oracle for small inputs.
    oracle = fnmatch.fnmatchcase(path, glob) if len(glob) <= 12 and len(path) <= 40 else None
    return path_matches(glob, path), fnmatch_matches(path, glob), oracle


@FUZZ
@given(globs, paths)
def test_any_glob_against_any_path(glob: str, path: str) -> None:
    outcome = run_bounded(_match, glob, path, memory_mib=MEMORY_MIB, deadline=DEADLINE_SECONDS)
    assert outcome.how == "returned", outcome.value
    assert outcome.cpu_seconds < CPU_SECONDS, outcome
    _, as_branch, oracle = outcome.value
    assert oracle is None or as_branch == oracle
