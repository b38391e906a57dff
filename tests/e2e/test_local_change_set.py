"""A change set across three repositories, played end to end in the local stack (issue 31): the
GitHub sandbox holding octo/schema, octo/server and octo/client under one installation, moto, and
every agent through the real Copilot CLI against the scripted model
(:func:`squadron.local.change_set_demo.change_set_policy`; ``squadron local --demo change-set``
plays the same).

The PM of octo/schema proposes a set over the three (the server needs the schema, the client the
server). Nothing starts in the server or the client before a writer's ``/squadron change-set
approve <id>``; then each repository's dev agent works on ``change-set/<id>`` and opens its pull
request; ``squadron/change-set`` passes only once every member's gate does. Merged, the members
merge in dependency order. When the client's merge is refused after the two others merged, their
revert pull requests are opened, newest merge first, and a person is told on the origin issue.

One stack serves both plays (each its own issue and set): starting it is the slow part.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from squadron.adapters.registry.change_sets import DynamoChangeSets
from squadron.domain.change_sets import CHECK_NAME, ChangeSet, SetState, branch_for
from squadron.local.change_set_demo import (
    CHANGE_SET_FLOWS,
    REPOSITORIES,
    UNKNOWN_CHECK,
    Played,
    change_set_policy,
    play_change_set,
)
from squadron.local.sandbox import GitHubSandbox
from squadron.local.stack import LocalStack
from squadron.local.wiring import LocalOptions
from tests.e2e.conftest import ROOT

pytestmark = pytest.mark.e2e

FLOWS = ".squadron/workflows/approval-flows.yaml"
SCHEMA, SERVER, CLIENT = REPOSITORIES
#: Long enough for agents through the real CLI on a loaded machine; every wait ends at its condition.
AGENTS = 300.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with pytest.MonkeyPatch.context() as env:
        for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
            env.delenv(name, raising=False)
        local = LocalStack(
            LocalOptions(
                root=ROOT,
                state_dir=Path(tmp_path_factory.mktemp("change-set")) / "state",
                model_policy=change_set_policy,
                repo=SCHEMA,
                extra_repos=(SERVER, CLIENT),
                files={FLOWS: CHANGE_SET_FLOWS},
                reconcile_seconds=3600,
                pm_linger_seconds=1,
            )
        )
        try:
            local.start()
            yield local
        finally:
            local.stop()
            assert local.launcher is None or local.launcher.running() == []  # no orphan agent


def sandbox_of(stack: LocalStack) -> GitHubSandbox:
    assert stack.sandbox is not None
    return stack.sandbox


def stored(stack: LocalStack, set_id: str) -> ChangeSet:
    assert stack.resources is not None
    found = DynamoChangeSets(stack.resources.table_name).get_change_set(set_id)
    assert found is not None
    return found


def first_delivery_in(sandbox: GitHubSandbox, repo: str, after: int = 0) -> int | None:
    """The index of the first webhook delivery of ``repo`` from ``after`` on."""
    return next(
        (
            i
            for i, d in enumerate(sandbox.deliveries)
            if i >= after and (d.payload.get("repository") or {}).get("full_name") == repo
        ),
        None,
    )


def approval_delivery(sandbox: GitHubSandbox, played: Played) -> int:
    return next(
        i
        for i, d in enumerate(sandbox.deliveries)
        if d.event == "issue_comment"
        and d.payload["repository"]["full_name"] == SCHEMA
        and f"change-set approve {played.set_id}" in d.payload["comment"]["body"]
    )


def members_pulls_are_the_apps_on_the_sets_branch(sandbox: GitHubSandbox, played: Played) -> None:
    for repo, number in played.pulls.items():
        pull = sandbox.repos[repo].pulls[number]
        assert pull["head"]["ref"] == branch_for(played.set_id), repo
        assert pull["user"]["login"] == sandbox.bot_login, repo


def test_a_set_merges_its_three_repositories_in_dependency_order(stack: LocalStack) -> None:
    sandbox = sandbox_of(stack)
    out = io.StringIO()
    played = play_change_set(stack, out, step_timeout=AGENTS)  # DemoStuck names a step not reached
    said = out.getvalue()
    assert "nothing started in octo/server, octo/client" in said, said
    # Before the approval, nothing of the server or the client was touched: their first webhook
    # (a member issue the App opened) comes after the writer's command.
    approval = approval_delivery(sandbox, played)
    for repo in (SERVER, CLIENT):
        first = first_delivery_in(sandbox, repo)
        assert first is not None and first > approval, repo
        issue = sandbox.repos[repo].issues[played.issues[repo]]
        assert issue["user"]["login"] == sandbox.bot_login
    members_pulls_are_the_apps_on_the_sets_branch(sandbox, played)
    # The combined check passed on every member's head once the last gate passed.
    for repo, number in played.pulls.items():
        head = sandbox.repos[repo].pulls[number]["head"]["sha"]
        states = [
            s["state"] for s in sandbox.repos[repo].statuses.get(head, []) if s["context"] == CHECK_NAME
        ]
        oldest_first = states[::-1]  # GitHub lists statuses newest first
        assert oldest_first and oldest_first[-1] == "success", (repo, states)
        assert "pending" in oldest_first[: oldest_first.index("success")], (repo, states)
    # Merged in dependency order: the order of GitHub's pull_request closed (merged) webhooks.
    merges = [
        d.payload["repository"]["full_name"]
        for d in sandbox.deliveries
        if d.event == "pull_request"
        and d.action == "closed"
        and d.payload["pull_request"]["merged"]
        and d.payload["pull_request"]["head"]["ref"] == branch_for(played.set_id)
    ]
    assert merges == list(REPOSITORIES)
    assert all(
        sandbox.repos[r].pulls[n]["merged_by"]["login"] == sandbox.bot_login for r, n in played.pulls.items()
    )
    change_set = stored(stack, played.set_id)
    assert change_set.state is SetState.MERGED
    assert all(m.merged for m in change_set.members)
    assert stack.errors == []


def test_the_last_merge_refused_reverts_the_others_newest_first_and_tells_a_person(stack: LocalStack) -> None:
    sandbox = sandbox_of(stack)
    out = io.StringIO()
    played = play_change_set(stack, out, step_timeout=AGENTS, fail_last=True)
    members_pulls_are_the_apps_on_the_sets_branch(sandbox, played)
    change_set = stored(stack, played.set_id)
    assert change_set.state is SetState.REVERTING
    assert CLIENT in (change_set.failure or "") and UNKNOWN_CHECK in (change_set.failure or "")
    pulls = {repo: sandbox.repos[repo].pulls[n] for repo, n in played.pulls.items()}
    assert pulls[SCHEMA]["merged"] and pulls[SERVER]["merged"]
    assert not pulls[CLIENT]["merged"] and pulls[CLIENT]["state"] == "open"
    # A revert pull request in each repository that merged, opened by the App, newest merge first.
    reverts = {m.repository: m.revert_pr for m in change_set.members if m.revert_pr}
    assert set(reverts) == {SCHEMA, SERVER}
    for repo, number in reverts.items():
        revert = sandbox.repos[repo].pulls[int(number)]
        assert revert["head"]["ref"] == f"revert-{played.pulls[repo]}-{branch_for(played.set_id)}"
        assert revert["user"]["login"] == sandbox.bot_login and revert["state"] == "open"
    opened = [
        d.payload["repository"]["full_name"]
        for d in sandbox.deliveries
        if d.event == "pull_request"
        and d.action == "opened"
        and d.payload["pull_request"]["head"]["ref"].startswith("revert-")
        and d.payload["pull_request"]["head"]["ref"].endswith(branch_for(played.set_id))
    ]
    assert opened == [SERVER, SCHEMA]
    # The person told: the App's comment on the origin issue names the failure and the reverts.
    told = [
        c["body"]
        for c in sandbox.repos[SCHEMA].comments.get(played.issue, [])
        if c["user"]["login"] == sandbox.bot_login and f"{SERVER}#{reverts[SERVER]}" in c["body"]
    ]
    assert len(told) == 1, sandbox.repos[SCHEMA].comments.get(played.issue)
    assert CLIENT in told[0] and f"{SCHEMA}#{reverts[SCHEMA]}" in told[0]
    # ... and as the schema's escalation says: its maintainers mentioned, its label and assignee,
    # and a needs-human issue filed by the App.
    assert "@octo-maintainer" in told[0]
    origin = sandbox.repos[SCHEMA].issues[played.issue]
    assert "needs-human" in {label["name"] for label in origin["labels"]}
    assert "octo-maintainer" in {a["login"] for a in origin["assignees"]}
    filed = [
        i
        for n, i in sandbox.repos[SCHEMA].issues.items()
        if n > played.issue
        and "pull_request" not in i
        and i["user"]["login"] == sandbox.bot_login
        and "needs-human" in {label["name"] for label in i["labels"]}
    ]
    assert len(filed) == 1, [i["title"] for i in filed]
    assert stack.errors == []
