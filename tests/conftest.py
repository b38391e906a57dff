"""Fixtures shared by every test: AWS is never reached for real."""

from __future__ import annotations

import os
from typing import Any

import pytest
from botocore.loaders import JSONFileLoader
from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

from tests.support import moto_transactions

# Set before any boto3 client exists: tests must never find real credentials.
os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SECURITY_TOKEN": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "POWERTOOLS_TRACE_DISABLED": "1",
        "POWERTOOLS_METRICS_NAMESPACE": "Squadron",
        "POWERTOOLS_SERVICE_NAME": "test",
        "POWERTOOLS_DEV": "0",
    }
)
os.environ.pop("AWS_PROFILE", None)
os.environ.pop("AWS_ENDPOINT_URL", None)


_MODELS: dict[str, Any] = {}
_load_model_file = JSONFileLoader.load_file


def _load_model_file_once(self: JSONFileLoader, file_path: str) -> Any:
    """botocore's data files (service models, endpoints), parsed once per process.

    botocore caches them per session, and moto's ``mock_aws`` gives each test a fresh default
    session: every test parsed the same JSON again (half a second of each test on moto). They are
    botocore's own files, the same for every test: nothing a test does is shared through them."""
    if file_path not in _MODELS:
        _MODELS[file_path] = _load_model_file(self, file_path)
    return _MODELS[file_path]


JSONFileLoader.load_file = _load_model_file_once  # type: ignore[method-assign]
moto_transactions.install()


#: Paths (folders or files, the first that matches) whose tests share one worker under ``-n``: the
#: end-to-end tests (local stacks and the Copilot CLI, one at a time within a group: they start
#: processes that must not race each other for shared caches) and the infra tests (one synthesis
#: of the app, cached per worker). The end-to-end tests are two groups of about equal length, one
#: per worker: as one group they were the longest worker's whole run (11 min of the suite's 12.7,
#: measured alone) and decided the suite's wall time. The image runtime's cache is used by one
#: file only, in one group. The merge queue's test is in the first group: by the durations of the
#: last two full runs (`make test --durations`) the second group was 110-120 s the longer
#: (about 490 s against 376 s, 560 s against 440 s); with it, they are within about 20 s. The pipeline
#: runs' file (about 50 s) is in the first group too; files of their own for agent and human
#: stages belong in the second until durations say otherwise.
TOGETHER = {
    "tests/e2e/test_local_resilience.py": "e2e-a",
    "tests/e2e/test_local_burst.py": "e2e-a",
    "tests/e2e/test_local_showcase.py": "e2e-a",
    "tests/e2e/test_local_merge_queue.py": "e2e-a",
    # Pipeline runs (about 50 s alone for four stacks), beside the merge queue's.
    "tests/e2e/test_local_pipelines.py": "e2e-a",
    "tests/e2e/": "e2e-b",
    "tests/infra/": "infra",
}
#: The groups handed out first, one to each worker as it starts (xdist would start with the group of
#: the most tests, infra, and hand the second end-to-end group to whichever worker ran short first:
#: possibly the one that had the first, in a row again).
FIRST = ("e2e-a", "e2e-b")


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to under ``-n``: its path's group, or the test alone."""
    return next((group for path, group in TOGETHER.items() if nodeid.startswith(path)), nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Under ``-n 2 --dist loadgroup`` (`make test`), each group of :data:`TOGETHER` runs on one
    worker and everything else is shared between the workers.

    Our own scheduler, not ``xdist_group`` marks: pytest-xdist 3.8 applies those by rewriting
    ``item._nodeid``, which pytest 9 no longer reads, so the marks grouped nothing and end-to-end
    tests ran on both workers at once (racing for the image runtime's cache, and for the CPU)."""
    if config.getvalue("dist") != "loadgroup":
        return None

    class ByFolder(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

        def _assign_work_unit(self, node: object) -> None:
            waiting = [group for group in FIRST if group in self.workqueue]
            if waiting:
                self.workqueue.move_to_end(waiting[0], last=False)
            super()._assign_work_unit(node)

    return ByFolder(config, log)
