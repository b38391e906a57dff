"""`make test` runs on two workers (pytest-xdist) but keeps the end-to-end tests on one worker and
the infra tests on one: they start whole stacks and the Copilot CLI, share caches, and must not
race each other. A grouping that silently stops grouping (as xdist's own marks did under pytest 9)
fails here: a small suite is run the way `make test` runs it, and each test says where it ran.
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
        ("tests/e2e/test_local_stack.py::test_demo", "e2e"),
        ("tests/e2e/test_x.py::test_y[param@1]", "e2e"),
        ("tests/infra/test_infra_deploy.py::test_a", "infra"),
        ("tests/unit/test_e2e_like.py::test_tests/e2e/", "tests/unit/test_e2e_like.py::test_tests/e2e/"),
        ("tests/unit/test_a.py::test_b", "tests/unit/test_a.py::test_b"),
    ],
)
def test_each_test_belongs_to_its_folders_group_or_to_itself(nodeid: str, scope: str) -> None:
    assert scope_of(nodeid) == scope


def test_under_two_workers_each_group_runs_on_one_worker(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    shutil.copy(ROOT / "tests" / "conftest.py", tests / "conftest.py")
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n", encoding="utf-8")
    where = tmp_path / "where"
    where.mkdir()
    test = (
        "import os, pathlib\n"
        "def test_{name}():\n"
        "    pathlib.Path({where!r}, '{folder}-{name}').write_text(os.environ['PYTEST_XDIST_WORKER'])\n"
    )
    for folder in ("e2e", "infra", "unit"):
        (tests / folder).mkdir()
        for module in range(3):
            body = "".join(
                test.format(name=f"m{module}_{n}", where=str(where), folder=folder) for n in range(4)
            )
            (tests / folder / f"test_{folder}_{module}.py").write_text(body, encoding="utf-8")
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
    assert len(ran) == 36
    for group in ("e2e", "infra"):
        assert len({worker for name, worker in ran.items() if name.startswith(group)}) == 1, ran
