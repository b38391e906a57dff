"""The demo scenario on a repository whose main requires GitHub's merge queue: the issue still
ends merged, through the queue. The REST merge is refused (405); the merge gate queues the pull
request over GraphQL; GitHub's queue asks checks of its merge group (``merge_group``
``checks_requested``), which comes back through the ingress and the router to the gate, whose
``squadron/merge`` on the group's head (branch protection requires it) lets the queue merge it;
``merge_group`` ``destroyed`` (``merged``) deletes the branch."""

from __future__ import annotations

import io

import pytest

from squadron.local import demo
from squadron.local.sandbox.queues import MERGE_QUEUE_BOT
from tests.e2e.conftest import StackFactory, eventually

pytestmark = pytest.mark.e2e

FLOWS = ".squadron/workflows/approval-flows.yaml"


def test_an_issue_ends_merged_through_the_merge_queue(local_stack: StackFactory) -> None:
    stack = local_stack(demo.demo_policy, files={FLOWS: demo.DEMO_FLOWS})
    sandbox = stack.sandbox
    assert sandbox is not None
    repo = stack.options.repo
    sandbox.require_merge_queue(repo, "main")
    # As `squadron branch-protection apply` would ask: the gate's verdict, pinned to the App.
    sandbox.repos[repo].protections["main"] = {
        "required_status_checks": {
            "strict": True,
            "contexts": [],
            "checks": [{"context": "squadron/merge", "app_id": sandbox.app_id}],
        }
    }
    out = io.StringIO()
    demo.play(stack, out)  # raises DemoStuck naming the step it could not reach
    said = out.getvalue()
    assert "squadron merged PR #3" in said and "the scenario is complete" in said, said
    pull = sandbox.repos[repo].pulls[3]
    assert pull["merged"] and pull["merged_by"]["login"] == MERGE_QUEUE_BOT
    groups = [(d.action, d.payload.get("reason")) for d in sandbox.deliveries if d.event == "merge_group"]
    assert groups == [("checks_requested", None), ("destroyed", "merged")]
    (requested,) = [d.payload for d in sandbox.deliveries if d.action == "checks_requested"]
    group = requested["merge_group"]["head_sha"]
    # Squadron's verdict reached the group's head, as the App: what let the queue merge it.
    statuses = sandbox.repos[repo].statuses[group]
    assert ("squadron/merge", "success", sandbox.bot_login) in {
        (s["context"], s["state"], s["creator"]["login"]) for s in statuses
    }
    eventually(
        lambda: sandbox.repos[repo].store.sha(f"refs/heads/{pull['head']['ref']}") is None,
        "the merged branch to be deleted",
    )
    assert stack.errors == []
