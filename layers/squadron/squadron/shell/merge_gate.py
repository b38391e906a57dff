"""The merge gate shell: read a pull request's state from GitHub, judge it (pure), act.

The choices are :mod:`squadron.domain.merge_gate`'s (which reads a judgement needs, the verdict,
the statuses to post, the conflict to report, whether to merge and which branch to delete) and
:func:`squadron.domain.merge_queue.queue_step`'s; this module reads, asks them, and carries out.

Called by the router whenever something that can change the verdict happens
(the PR opened or got commits, a review, a check or status). Each evaluation
reads the PR, its head commit's statuses and check runs, its reviews and — only
when the approval flow into its base protects paths — its changed files (four
or five reads, each a conditional GET through the transport's ETag cache: what
did not change since the last judgement is a 304, which costs no rate limit),
then the repository permission of each reviewer
whose standing review is an approval or a change request (the authority rule:
only those with write access count; not the author, the App or bots, each
asked once per judgement, at most :data:`~squadron.domain.merge_gate.MAX_REVIEWERS_CHECKED`, and through
the router's five-minute cache when wired with it: usually no call at all),
posts ``squadron/merge`` saying in words why the
PR is not merging yet, and merges it — with the approval flow's consent, the
method the flow names, pinned to the head commit that was judged — when the
flow allows it; then deletes the branch if the flow says so. Evaluating twice
is harmless: the status is the same, and a merge of a PR whose head moved or
that was merged already is refused by GitHub and reported, not retried.

A merge whose answer is lost (GitHub applied it and answered 5xx, or the answer
timed out: :class:`MaybeAppliedError`) is not taken for a failure: the PR is read,
and if the App merged it, what follows a merge (the merged event, the branch
deletion) follows at once from what GitHub says. Only a PR still open is sent the
merge again (pinned to the judged head, so it can only merge that once).

A base whose REST merge answers 405 "Changes must be made through the merge queue" (or, for a
head the gate judged ready before, whose rules say it requires GitHub's merge queue) is merged
through it: the PR is queued with GraphQL's
``enqueuePullRequest`` pinned to the judged head, after a look at its ``mergeQueueEntry`` (an
entry at that head is left as it is; a queueing whose answer was lost is found there, never
sent twice), and GitHub merges it once its merge group's checks pass. A judgement that no
longer merges takes out of the queue an entry the App made, never a person's
(:mod:`squadron.domain.merge_queue`). The ``merge_group`` webhooks come back here:
``checks_requested`` posts the PR's Squadron statuses on the group's head (branch protection
requires them there too), and ``destroyed`` with ``merged`` deletes the branch as a merge by
the gate would.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from squadron.adapters.github.errors import (
    GitHubError,
    GitHubUnavailableError,
    MaybeAppliedError,
    RateLimitedError,
)
from squadron.adapters.github.keyed import SENDS, once
from squadron.config.parse import SquadronConfig
from squadron.domain.app_acts import merged_by_app
from squadron.domain.approval import GateResult
from squadron.domain.change_set_merges import is_member_branch
from squadron.domain.events import EventEnvelope
from squadron.domain.merge_gate import (
    GateDecision,
    GateReads,
    branch_after_queue_merge,
    conflict_envelope,
    head_sha,
    judge,
    merged_event,
    not_gated,
    permissions_wanted,
    reads_files,
)
from squadron.domain.merge_queue import entry_head, is_queue_refusal, queue_step
from squadron.domain.permissions import MergeConsent

logger = logging.getLogger(__name__)


def _now() -> datetime:
    return datetime.now(UTC)


Json = dict[str, Any]

#: (installation, repository, login) -> the login's repository permission.
PermissionSource = Callable[[int | None, str, str], str]
#: (installation, repository, pull request, the gate's decision) -> the decision carried out.
ChangeSetHook = Callable[[int | None, str, Json, GateDecision], GateDecision]


class GateClient(Protocol):
    """The framework's GitHub client for one repository (``GitHubClient`` satisfies it)."""

    def get_pull(self, number: int) -> Json: ...
    def list_pull_files(self, number: int) -> list[Json]: ...
    def list_reviews(self, number: int) -> list[Json]: ...
    def get_combined_status(self, ref: str) -> Json: ...
    def list_check_runs(self, ref: str) -> list[Json]: ...
    def collaborator_permission(self, login: str) -> str: ...
    def create_status(self, sha: str, *, state: Any, context: str, description: str = "") -> Json: ...
    def merge_pull(
        self, number: int, *, consent: MergeConsent, method: Any = ..., sha: str | None = None
    ) -> Json: ...
    def delete_branch(self, branch: str) -> None: ...
    def branch_requires_merge_queue(self, branch: str) -> bool: ...
    def merge_queue_entry(self, number: int) -> tuple[str, Json | None]: ...
    def enqueue_pull(
        self, number: int, *, node_id: str, consent: MergeConsent, expected_head: str
    ) -> Json: ...
    def dequeue_pull(self, number: int, *, node_id: str) -> None: ...


@dataclass(frozen=True)
class GateOutcome:
    pr_number: int
    result: GateResult | None
    merged: bool = False
    detail: str = ""
    #: In its base's merge queue at the judged head (GitHub merges it when its group passes).
    queued: bool = False
    #: Merged: GitHub's merge commit (as it answered, or as the pull request shows it).
    sha: str | None = None


class MergeGate:
    def __init__(
        self,
        *,
        client: Callable[[int | None, str], GateClient],
        config_for: Callable[[str], SquadronConfig],
        bot_login: str,
        announce: Callable[[EventEnvelope], object] | None = None,
        clock: Callable[[], datetime] = _now,
        permission: PermissionSource | None = None,
        change_set_hook: ChangeSetHook | None = None,
    ) -> None:
        self.client = client
        #: The router's cached permission lookup; without it, the judgement's own client asks.
        self.permission = permission
        self.config_for = config_for
        self.bot_login = bot_login
        #: Puts the App's own merge on events.fifo (its webhook is dropped at the ingress).
        self.announce = announce
        self.clock = clock
        #: A change set member's pull request: its verdict goes to its set, which merges it
        #: (:meth:`squadron.shell.change_set_work.ChangeSetWork.gate_judged`; docs/change-sets.md).
        self.change_set_hook = change_set_hook

    def evaluate(
        self,
        installation_id: int | None,
        repo: str,
        pr_number: int,
        author_role: str | None = None,
        *,
        issue_number: int | None = None,
        cause: str = "",
        merge_group: str | None = None,
        queue_merged: bool = False,
    ) -> GateOutcome:
        """Judge PR ``pr_number`` and act on the verdict.

        ``merge_group``: the head sha of a merge group GitHub asks checks of for this PR (its
        Squadron statuses are posted there too). ``queue_merged``: GitHub's merge queue merged it
        (the branch is deleted if the flow says so)."""
        github = self.client(installation_id, repo)
        pr = github.get_pull(pr_number)
        if queue_merged and pr.get("merged"):
            return self._after_queue_merge(github, repo, pr, author_role)
        closed = not_gated(pr, pr_number)
        if closed is not None:
            return GateOutcome(pr_number, None, detail=closed)
        sha = head_sha(pr)
        decision = self._judge(
            github,
            installation_id,
            repo,
            pr,
            author_role=author_role,
            issue_number=issue_number,
            merge_group=merge_group,
        )
        if self.change_set_hook is not None:
            decision = self.change_set_hook(installation_id, repo, pr, decision)
        result = decision.result
        for status in decision.statuses:
            github.create_status(
                status.sha, state=status.state, context=status.context, description=status.description
            )
        if result.ignored:
            logger.info(
                "PR #%s of %s: reviews without authority ignored: %s", pr_number, repo, result.ignored
            )
        if decision.conflict is not None and self.announce is not None:
            self.announce(
                conflict_envelope(
                    decision.conflict,
                    pr,
                    repo=repo,
                    installation_id=installation_id,
                    cause=cause,
                    now=self.clock(),
                )
            )
        queue = decision.reads_queue_rules and github.branch_requires_merge_queue(decision.base)
        consent = decision.consent
        if consent is not None and is_member_branch(str((pr.get("head") or {}).get("ref") or "")):
            # A change set's member merges with its set, in order (shell/change_set_merging.py).
            return GateOutcome(pr_number, result, detail=f"{result.description}; merges with its change set")
        if consent is None:
            left = self._through_queue(github, pr_number, None, sha, result) if queue else None
            return GateOutcome(
                pr_number, result, detail=result.description + (f"; {left.detail}" if left else "")
            )
        if queue:
            return self._through_queue(github, pr_number, consent, sha, result)
        try:
            merged, read = self._merge(github, pr_number, consent, result.method, sha)
        except (RateLimitedError, GitHubUnavailableError):
            raise  # GitHub could not answer: the event goes back to the queue and is judged again
        except GitHubError as exc:
            if is_queue_refusal(exc.status, exc.message):  # the rules changed since they were read
                return self._through_queue(github, pr_number, consent, sha, result)
            # 405 not mergeable, 409 the head moved, 422...: the next event re-evaluates.
            logger.warning("PR #%s of %s not merged: %s", pr_number, repo, exc)
            return GateOutcome(pr_number, result, detail=f"not merged: {exc}")
        self._merged(github, installation_id, read or pr, merged, decision)
        return GateOutcome(pr_number, result, merged=True, detail=f"merged with {result.method}")

    # --- a change set's merges (shell/change_set_merging.py; docs/change-sets.md) ----------------

    def judgement(
        self, installation_id: int | None, repo: str, pr: Json, author_role: str | None = None
    ) -> GateDecision:
        """The gate's verdict on open pull request ``pr`` (as just read), without acting on it:
        no status posted, nothing merged. A change set asks it before merging a member."""
        return self._judge(
            self.client(installation_id, repo), installation_id, repo, pr, author_role=author_role
        )

    def _judge(
        self,
        github: GateClient,
        installation_id: int | None,
        repo: str,
        pr: Json,
        *,
        author_role: str | None,
        issue_number: int | None = None,
        merge_group: str | None = None,
    ) -> GateDecision:
        """What the gate reads of open pull request ``pr`` (its files, reviews and their authors'
        permissions, its head's statuses and check runs), judged."""
        number = int(pr["number"])
        config = self.config_for(repo)
        files = self._files(github, pr, number, config)
        listed = github.list_reviews(number)
        permissions = self._permissions(
            github, installation_id, repo, permissions_wanted(pr, listed, self.bot_login)
        )
        sha = head_sha(pr)
        reads = GateReads(
            number,
            pr,
            files,
            listed,
            permissions,
            github.get_combined_status(sha),
            github.list_check_runs(sha),
        )
        return judge(
            reads,
            repo=repo,
            flows=config.approval_flows,
            groups={name: group.members for name, group in config.config.human_groups.items()},
            bot_login=self.bot_login,
            author_role=author_role,
            issue_number=issue_number,
            merge_group=merge_group,
        )

    def merge_judged(
        self, installation_id: int | None, repo: str, pr: Json, decision: GateDecision
    ) -> GateOutcome:
        """Merge ``pr`` as the gate would on ``decision`` (its consent, its method, pinned to its
        judged head; through the merge queue when its base requires one), exactly once: a merge
        whose answer was lost is read back. Merged: the merged event is announced and the branch
        deleted as the flow says. GitHub's refusal of a REST merge raises its GitHubError; a
        queueing refused comes back neither merged nor queued, with GitHub's words."""
        if decision.consent is None:
            raise ValueError(f"PR #{decision.pr_number}: the gate's verdict is not to merge")
        github = self.client(installation_id, repo)
        result, sha = decision.result, decision.head_sha
        if decision.reads_queue_rules and github.branch_requires_merge_queue(decision.base):
            return self._through_queue(github, decision.pr_number, decision.consent, sha, result)
        try:
            merged, read = self._merge(github, decision.pr_number, decision.consent, result.method, sha)
        except GitHubError as exc:
            if is_queue_refusal(exc.status, exc.message):
                return self._through_queue(github, decision.pr_number, decision.consent, sha, result)
            raise
        self._merged(github, installation_id, read or pr, merged, decision)
        return GateOutcome(
            decision.pr_number,
            result,
            merged=True,
            detail=f"merged with {result.method}",
            sha=str(merged.get("sha") or "") or None,
        )

    def _merged(
        self, github: GateClient, installation_id: int | None, pr: Json, merged: Json, decision: GateDecision
    ) -> None:
        """After the App's merge of ``pr``: the merged event announced, the branch deleted as the
        flow says."""
        if self.announce is not None:
            self.announce(
                merged_event(
                    pr, merged, installation_id=installation_id, bot_login=self.bot_login, now=self.clock()
                )
            )
        if decision.delete_branch is not None:
            github.delete_branch(decision.delete_branch)

    def _through_queue(
        self, github: GateClient, pr_number: int, consent: MergeConsent | None, sha: str, result: GateResult
    ) -> GateOutcome:
        """The merge queue's part of a judgement (``consent`` None: the verdict is not to merge)."""
        node, entry = github.merge_queue_entry(pr_number)
        step = queue_step(merge=consent is not None, entry=entry, head_sha=sha, bot_login=self.bot_login)
        if step == "queued":
            return GateOutcome(pr_number, result, queued=True, detail="in the merge queue")
        if step == "leave":
            login = str(((entry or {}).get("enqueuer") or {}).get("login") or "someone")
            return GateOutcome(
                pr_number, result, detail=f"in the merge queue, queued by {login}: left to them"
            )
        if step == "dequeue":
            github.dequeue_pull(pr_number, node_id=node)
            logger.info(
                "PR #%s: taken out of the merge queue (queued at %s)", pr_number, entry_head(entry or {})
            )
            if consent is None:
                return GateOutcome(pr_number, result, detail="taken out of the merge queue")
        if consent is None:
            return GateOutcome(pr_number, result, detail=result.description)

        def find() -> Json | None:
            """The entry the lost queueing made; or, gone already, the merge the queue made of it."""
            _, found = github.merge_queue_entry(pr_number)
            if found is not None:
                return found if entry_head(found) == sha else None
            pr = github.get_pull(pr_number)
            merged = pr.get("merged") and (pr.get("head") or {}).get("sha") == sha
            return {"state": "MERGED", "position": 0, "headCommit": {"oid": sha}} if merged else None

        try:
            queued = once(
                lambda: github.enqueue_pull(pr_number, node_id=node, consent=consent, expected_head=sha), find
            )
        except (RateLimitedError, GitHubUnavailableError):
            raise
        except GitHubError as exc:  # the head moved, a conflict, a rule: the next event re-evaluates
            logger.warning("PR #%s not queued: %s", pr_number, exc)
            return GateOutcome(pr_number, result, detail=f"not queued: {exc}")
        return GateOutcome(
            pr_number, result, queued=True, detail=f"queued to merge (position {queued.get('position')})"
        )

    def _after_queue_merge(
        self, github: GateClient, repo: str, pr: Json, author_role: str | None
    ) -> GateOutcome:
        """GitHub's merge queue merged the PR: delete its branch if its flow says so (as after a merge)."""
        number = int(pr["number"])
        config = self.config_for(repo)
        files = self._files(github, pr, number, config)
        branch = branch_after_queue_merge(
            pr, files, repo=repo, flows=config.approval_flows, author_role=author_role
        )
        if branch is not None:
            github.delete_branch(branch)  # gone already is fine: once in effect
            return GateOutcome(number, None, merged=True, detail="merged by the merge queue; branch deleted")
        return GateOutcome(number, None, merged=True, detail="merged by the merge queue")

    @staticmethod
    def _files(github: GateClient, pr: Json, number: int, config: SquadronConfig) -> list[str]:
        """The PR's changed files, read only when a flow that protects paths could use them."""
        if not reads_files(pr, config.approval_flows):
            return []
        return [str(f.get("filename")) for f in github.list_pull_files(number)]

    def _merge(
        self, github: GateClient, pr_number: int, consent: MergeConsent, method: str, sha: str
    ) -> tuple[Json, Json | None]:
        """GitHub's answer to the merge, and the PR as read when that answer was lost (else None).

        Lost (:class:`MaybeAppliedError`): the PR is read; merged by the App, GitHub's merge
        commit stands for the answer. Still open: the merge is sent again, at most
        :data:`~squadron.adapters.github.keyed.SENDS` times in all; a refusal after a lost answer
        reads the PR once more (the first merge may have landed meanwhile)."""
        lost: MaybeAppliedError | None = None
        for _send in range(SENDS):
            try:
                return github.merge_pull(pr_number, consent=consent, method=method, sha=sha), None
            except MaybeAppliedError as exc:
                lost = exc
            except GitHubError:
                if lost is None:
                    raise
                found = self._merged_by_app(github, pr_number)
                if found is None:
                    raise
                return found
            found = self._merged_by_app(github, pr_number)
            if found is not None:
                logger.info("PR #%s: the merge's answer was lost, but GitHub merged it", pr_number)
                return found
        assert lost is not None
        raise lost

    def _merged_by_app(self, github: GateClient, pr_number: int) -> tuple[Json, Json] | None:
        """The merge's answer as GitHub's PR shows it, and the PR, if the App merged it."""
        pr = github.get_pull(pr_number)
        if not merged_by_app(pr, self.bot_login):
            return None
        answer = {"sha": pr.get("merge_commit_sha"), "merged": True, "message": "merged (answer lost)"}
        return answer, pr

    def _permissions(
        self, github: GateClient, installation_id: int | None, repo: str, logins: list[str]
    ) -> dict[str, str]:
        """Each login's repository permission, asked once in this judgement."""
        if self.permission is None:
            return {login: github.collaborator_permission(login) for login in logins}
        return {login: self.permission(installation_id, repo, login) for login in logins}
