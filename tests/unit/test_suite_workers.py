"""`make test` runs on two workers (pytest-xdist) but keeps each group of end-to-end tests on one
worker (the two groups side by side, one on each) and the infra tests on one: they start whole
stacks and the Copilot CLI, share caches, and must not race each other within a group. A grouping
that silently stops grouping (as xdist's own marks did under pytest 9) fails here: a small suite is
run the way `make test` runs it, and each test says where it ran.
(That the other tests are shared is the table's word: which worker takes them is up to timing.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import scope_of

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("nodeid", "scope"),
    [
        ("tests/e2e/test_local_stack.py::test_demo", "e2e-b"),
        ("tests/e2e/test_x.py::test_y[param@1]", "e2e-b"),
        ("tests/e2e/test_local_resilience.py::test_a[lose]", "e2e-a"),
        ("tests/e2e/test_local_burst.py::test_a", "e2e-a"),
        ("tests/e2e/test_local_merge_queue.py::test_an_issue_ends_merged", "e2e-a"),
        ("tests/infra/test_infra_deploy.py::test_a", "infra"),
        ("tests/unit/test_e2e_like.py::test_tests/e2e/", "tests/unit/test_e2e_like.py::test_tests/e2e/"),
        ("tests/unit/test_a.py::test_b", "tests/unit/test_a.py::test_b"),
    ],
)
def test_each_test_belongs_to_its_paths_group_or_to_itself(nodeid: str, scope: str) -> None:
    assert scope_of(nodeid) == scope


#: The synthetic suite's files: each end-to-end group's, infra's, and tests of their own.
FILES = {
    "e2e": ("test_local_resilience.py", "test_local_burst.py", "test_local_stack.py", "test_containment.py"),
    "infra": ("test_infra_a.py", "test_infra_b.py", "test_infra_c.py"),
    "unit": ("test_unit_a.py", "test_unit_b.py", "test_unit_c.py"),
}


def test_under_two_workers_each_group_runs_on_one_worker(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    shutil.copy(ROOT / "tests" / "conftest.py", tests / "conftest.py")
    (tests / "support").mkdir()  # what the conftest imports of the suite's support
    for package in (tests, tests / "support"):
        (package / "__init__.py").touch()
    shutil.copy(ROOT / "tests" / "support" / "moto_transactions.py", tests / "support")
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n", encoding="utf-8")
    where = tmp_path / "where"
    where.mkdir()
    test = (
        "import os, pathlib\n"
        "def test_{n}():\n"
        "    pathlib.Path({where!r}, '{group}@{file}@{n}').write_text(os.environ['PYTEST_XDIST_WORKER'])\n"
    )
    for folder, files in FILES.items():
        (tests / folder).mkdir()
        for file in files:
            group = scope_of(f"tests/{folder}/{file}::test_0").replace("/", "|")  # a file's name
            body = "".join(test.format(n=n, where=str(where), group=group, file=file) for n in range(4))
            (tests / folder / file).write_text(body, encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            # Its own base directory: a pytest without one resets /tmp/pytest-of-<user> to 0700,
            # and the end-to-end tests' agent users (other uids) must traverse it meanwhile.
            f"--basetemp={tmp_path / 'basetemp'}",
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "tests",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ""},
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ran = {path.name: path.read_text() for path in where.iterdir()}
    assert len(ran) == 40
    workers = {
        group: {worker for name, worker in ran.items() if name.startswith(f"{group}@")}
        for group in ("e2e-a", "e2e-b", "infra")
    }
    assert all(len(each) == 1 for each in workers.values()), ran
    assert workers["e2e-a"] != workers["e2e-b"], ran  # the two end-to-end groups side by side
