"""`squadron local --demo change-set`: one change across three repositories, played against the
GitHub sandbox (docs/change-sets.md).

A person opens an issue in the first repository (the schema); the PM proposes a change set over
it and the two others, the server needing the schema and the client the server; nothing starts
in the other repositories until a writer comments ``/squadron change-set approve <id>`` on the
issue. Then every repository's dev agent works on ``change-set/<id>`` and opens its pull request;
``squadron/change-set`` passes on each only once every member's gate passes (CI is played by a
person's check runs, the last repository's last); the set merges them in dependency order.

Played with ``fail_last``, a person protects the last repository's main with a check nobody
posts before its CI passes: its merge is refused after the two others merged, the set opens
their revert pull requests (newest merge first) and tells a person on the origin issue.

Every agent runs through the real Copilot CLI and the real framework tools; only the model's
answers are scripted (:func:`change_set_policy`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TextIO

from squadron.domain.change_sets import CHECK_NAME, ChangeSet, SetState
from squadron.local.demo import HUMAN, DemoStuck, Timeline, last_prompt, prompt_role, sandbox_call
from squadron.local.feed import Feed, stack_feed
from squadron.local.model import Json, Turn, calls_since_prompt

#: The three repositories, in dependency order (each needs the one before it).
REPOSITORIES = ("octo/schema", "octo/server", "octo/client")
#: Every member merges once CI passes (no review: the scenario is the set, not its reviews).
CHANGE_SET_FLOWS = """\
version: 1
default:
  required_reviews: []
  required_status_checks: [ci]
  merge_policy: {method: squash, auto_merge: true, require_ci_pass: true, delete_branch: true}
"""
TITLE = "Rename the user field across schema, server and client"
#: The check a person's branch protection requires in the failing play: nobody posts it.
UNKNOWN_CHECK = "legal/cla"
_OPENED = re.compile(r"#(\d+) opened by ([\w\[\]-]+)")
_START = re.compile(r"Start on issue #(\d+)")
_SET = re.compile(r"/squadron change-set approve (cs-[0-9a-f]{12})")


def _tool_results(request: Json) -> str:
    return "\n".join(
        str(m.get("content") or "") for m in request.get("messages", []) if m.get("role") == "tool"
    )


def _repository(request: Json) -> str | None:
    """The repository the agent works in (its system prompt names it)."""
    system = "\n".join(
        str(m.get("content") or "")
        for m in request.get("messages", [])
        if m.get("role") in ("system", "developer")
    )
    named = [r for r in REPOSITORIES if r in system]
    return named[0] if named else None


def change_set_policy(request: Json) -> Turn | None:
    """The PM of the first repository proposes the set for each issue a person opens; each dev
    agent writes one file on its branch and opens its pull request; anyone else is quiet."""
    role, done = prompt_role(request), calls_since_prompt(request)
    if "circuit breaker" in last_prompt(request):
        return "Summary: stopped by a circuit breaker."
    if role == "pm":
        return _pm(request, done)
    if role in ("feat-dev", "bug-fix"):
        return _dev(request, done)
    return None


def _pm(request: Json, done: list[str]) -> Turn:
    if not done:
        return ("check_for_events", {})
    origin, (_, server, client) = REPOSITORIES[0], REPOSITORIES
    opened = [int(n) for n, who in _OPENED.findall(_tool_results(request)) if who == HUMAN]
    plan: list[Turn] = [("check_for_events", {})]
    for number in opened:
        plan.append(
            (
                "propose_change_set",
                {
                    "issue": number,
                    "repositories": [server, client],
                    "dependencies": [
                        {"repository": server, "needs": origin},
                        {"repository": client, "needs": server},
                    ],
                    "plan": "Rename the field in the schema first, then the server, then the client.",
                },
            )
        )
    plan.append(("report_complete", {"summary": "Proposed a change set for each new issue."}))
    return plan[len(done)] if len(done) < len(plan) else "Proposed."


def _dev(request: Json, done: list[str]) -> Turn:
    started = next((m for m in map(_START.search, _prompts(request)) if m), None)
    issue = started.group(1) if started else "0"
    plan: list[Turn] = [
        ("check_for_events", {}),
        (
            "bash",
            {
                "command": f"mkdir -p changes && printf 'renamed user to account\\n' > changes/issue-{issue}.md",
                "description": "write this repository's part",
            },
        ),
        ("open_pr", {"title": TITLE, "body": "This repository's part of the change set."}),
        ("report_complete", {"summary": "Opened this repository's pull request."}),
        "PR open.",
    ]
    return plan[len(done)] if len(done) < len(plan) else "Done."


def _prompts(request: Json) -> list[str]:
    texts = []
    for message in request.get("messages", []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                content = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            texts.append(str(content or ""))
    return texts


@dataclass
class Played:
    """What a play left: the set, its origin issue, each repository's pull request."""

    timeline: Timeline
    set_id: str
    issue: int
    pulls: dict[str, int] = field(default_factory=dict)
    #: Each repository's issue the set opened (the origin's is the origin issue).
    issues: dict[str, int] = field(default_factory=dict)


class _Play:
    def __init__(self, stack: Any, out: TextIO, step_timeout: float, feed: Feed | None) -> None:
        self.stack, self.sandbox = stack, stack.sandbox
        self.timeline = Timeline(out)
        self.step_timeout = step_timeout
        self.feed = feed or stack_feed(stack)
        self.repos = (stack.options.repo, *stack.options.extra_repos)
        if self.repos[:3] != REPOSITORIES:
            raise DemoStuck(
                f"the change-set scenario plays on {', '.join(REPOSITORIES)}, not {', '.join(self.repos)}"
            )

    def api(self, repo: str, method: str, path: str, who: str, **body: Any) -> Any:
        return sandbox_call(self.sandbox.base_url, repo, method, path, who, **body)

    def say(self, text: str) -> None:
        self.timeline.say(text)

    def wait(self, what: str, check: Callable[[], Any]) -> Any:
        deadline = time.monotonic() + self.step_timeout
        while time.monotonic() < deadline:
            for line in self.feed.poll():
                self.say(f"  {line}")
            value = check()
            if value:
                return value
            if self.stack.errors:
                raise DemoStuck(f"{what}: the stack failed: {self.stack.errors[-1]}")
            time.sleep(0.25)
        raise DemoStuck(f"stuck waiting for: {what}")

    def change_set(self, set_id: str) -> ChangeSet | None:
        from squadron.adapters.registry.change_sets import DynamoChangeSets  # noqa: PLC0415

        return DynamoChangeSets(self.stack.resources.table_name).get_change_set(set_id)

    def check_state(self, repo: str, sha: str) -> str | None:
        said = [s for s in self.sandbox.repos[repo].statuses.get(sha, []) if s["context"] == CHECK_NAME]
        return str(said[0]["state"]) if said else None  # newest first, as GitHub lists them

    def seen(self, repo: str) -> tuple[int, int, int]:
        """``repo``'s issues, branches and agent launches, counted."""
        state = self.sandbox.repos[repo]
        launched = [who for who, _ in self.stack.launcher.launches if who.startswith(f"{state.id}-")]
        return len(state.issues), len(state.store.branches()), len(launched)

    def untouched(self, repo: str, since: dict[str, tuple[int, int, int]]) -> str | None:
        """Why ``repo`` is no longer as it was (``since``: :meth:`seen`), or None."""
        now = self.seen(repo)
        if now != since[repo]:
            return f"{repo} has {now} issues, branches and agent launches; had {since[repo]}"
        return None

    def pass_ci(self, repo: str, number: int) -> None:
        head = self.sandbox.repos[repo].pulls[number]["head"]["sha"]
        self.api(
            repo,
            "POST",
            "/check-runs",
            "ci-bot",
            name="ci",
            head_sha=head,
            status="completed",
            conclusion="success",
        )

    def run(self, fail_last: bool) -> Played:
        origin, *others = REPOSITORIES
        before = {r: self.seen(r) for r in others}
        issue = int(
            self.api(origin, "POST", "/issues", HUMAN, title=TITLE, body="The field is `account` now.")[
                "number"
            ]
        )
        self.say(f"{HUMAN} opened {origin}#{issue}: {TITLE}")
        proposal = self.wait(
            "the PM's change set proposal",
            lambda: next(
                (
                    m
                    for c in self.sandbox.repos[origin].comments.get(issue, [])
                    if (m := _SET.search(c["body"]))
                ),
                None,
            ),
        )
        set_id = proposal.group(1)
        proposed = self.change_set(set_id)
        if proposed is None or proposed.state is not SetState.PROPOSED:
            raise DemoStuck(f"change set {set_id} is not proposed: {proposed}")
        order = " -> ".join(m.repository for m in proposed.members)
        self.say(f"the PM proposed change set {set_id} over {order}; it waits for a writer's approval")
        for repo in others:
            if (why := self.untouched(repo, before)) is not None:
                raise DemoStuck(f"before any approval: {why}")
        self.say(f"nothing started in {', '.join(others)}: no issue, no branch, no agent")
        self.api(
            origin, "POST", f"/issues/{issue}/comments", HUMAN, body=f"/squadron change-set approve {set_id}"
        )
        self.say(f"{HUMAN} (a writer of all three) approved: /squadron change-set approve {set_id}")
        working = self.wait(
            "every repository's pull request",
            lambda: (s := self.change_set(set_id)) is not None and all(m.pr_number for m in s.members) and s,
        )
        played = Played(
            self.timeline, set_id, issue, pulls={m.repository: int(m.pr_number or 0) for m in working.members}
        )
        for repo in others:
            played.issues[repo] = next(
                n
                for n, i in self.sandbox.repos[repo].issues.items()
                if set_id in (i.get("body") or "") and "pull_request" not in i
            )
        played.issues[origin] = issue
        self.say(
            "each dev agent worked on change-set/"
            + set_id
            + " and opened its pull request: "
            + ", ".join(f"{r}#{n}" for r, n in played.pulls.items())
        )
        last = REPOSITORIES[-1]
        for repo in reversed(REPOSITORIES[1:]):  # the last repository's CI first, the origin's last
            self.pass_ci(repo, played.pulls[repo])
            self.wait(f"{repo}'s gate", partial(self._judged, set_id, repo))
            self.say(
                f"CI passed on {repo}#{played.pulls[repo]}: its gate is met, squadron/change-set still pending"
            )
        for repo in REPOSITORIES[1:]:
            head = self.sandbox.repos[repo].pulls[played.pulls[repo]]["head"]["sha"]
            if self.check_state(repo, head) != "pending":
                raise DemoStuck(
                    f"squadron/change-set on {repo} is {self.check_state(repo, head)} before the last gate"
                )
        if fail_last:
            self.api(
                last,
                "PUT",
                "/branches/main/protection",
                HUMAN,
                required_status_checks={
                    "strict": False,
                    "contexts": [],
                    "checks": [{"context": UNKNOWN_CHECK}],
                },
                enforce_admins=None,
                required_pull_request_reviews=None,
                restrictions=None,
            )
            self.say(f"{HUMAN} protected {last}'s main with a check nobody posts ({UNKNOWN_CHECK})")
        self.pass_ci(origin, played.pulls[origin])
        self.say(f"CI passed on {origin}#{played.pulls[origin]}: every member's gate is met")
        # Failed, the set waits in ``reverting`` for its reverts' own gates (nobody merges them here).
        wanted = SetState.REVERTING if fail_last else SetState.MERGED
        ended = self.wait(
            f"the change set to be {wanted}",
            lambda: (s := self.change_set(set_id)) is not None and s.state is wanted and s,
        )
        if fail_last:
            self.say(f"{last}'s merge was refused: {ended.failure}")
            self.say(
                "the set opened revert pull requests, newest merge first: "
                + ", ".join(f"{m.repository}#{m.revert_pr}" for m in ended.members if m.revert_pr)
            )
            self.say(f"a person was told on {origin}#{issue}; the reverts wait for their own gates")
        else:
            self.say(
                "the set merged its members in order: "
                + " -> ".join(f"{r}#{played.pulls[r]}" for r in REPOSITORIES)
            )
            self.say(f"change set {set_id} is merged: the scenario is complete")
        return played

    def _judged(self, set_id: str, repo: str) -> bool:
        current = self.change_set(set_id)
        return current is not None and current.member(repo).gate == "ready"


def play_change_set(
    stack: Any,
    out: TextIO,
    *,
    step_timeout: float = 300.0,
    feed: Feed | None = None,
    fail_last: bool = False,
) -> Played:
    """Play the scenario on a started local stack serving :data:`REPOSITORIES`; raise DemoStuck."""
    return _Play(stack, out, step_timeout, feed).run(fail_last)
