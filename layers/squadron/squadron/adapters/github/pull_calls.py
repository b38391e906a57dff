"""The pull request calls of the role-enforcing GitHub client
(:class:`~squadron.adapters.github.client.GitHubClient`): pull requests, reviews, merges, and
GitHub's merge queue (GraphQL only: there is no REST endpoint for it).
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import quote

from squadron.adapters.github.client_core import ClientCore, Json
from squadron.adapters.github.errors import GraphQLError, MaybeAppliedError, NotFoundError
from squadron.domain.permissions import REVIEW_EVENT_ACTIONS, Action, CallerKind, MergeConsent, check, tagged

#: A merge queue entry's fields the App reads (GitHub's GraphQL ``MergeQueueEntry``).
_ENTRY_FIELDS = "id state position enqueuedAt enqueuer { __typename login } headCommit { oid }"
ENQUEUE_PULL_REQUEST = (
    "mutation($input: EnqueuePullRequestInput!) { enqueuePullRequest(input: $input) "
    f"{{ mergeQueueEntry {{ {_ENTRY_FIELDS} }} }} }}"
)
DEQUEUE_PULL_REQUEST = (
    "mutation($input: DequeuePullRequestInput!) { dequeuePullRequest(input: $input) "
    f"{{ mergeQueueEntry {{ {_ENTRY_FIELDS} }} }} }}"
)
MERGE_QUEUE_ENTRY = (
    "query($owner: String!, $name: String!, $number: Int!) { repository(owner: $owner, name: $name) "
    f"{{ pullRequest(number: $number) {{ id headRefOid mergeQueueEntry {{ {_ENTRY_FIELDS} }} }} }} }}"
)
#: GitHub's revert of a merged pull request: a new pull request from ``revert-<number>-<head ref>``.
REVERT_PULL_REQUEST = (
    "mutation($input: RevertPullRequestInput!) { revertPullRequest(input: $input) "
    "{ revertPullRequest { id number headRefName url state } } }"
)

ReviewEvent = Literal["APPROVE", "REQUEST_CHANGES", "COMMENT"]


class PullCalls(ClientCore):
    """Pull requests, their reviews and merges, and the merge queue."""

    def get_pull(self, number: int) -> Json:
        check(self.caller, Action.READ)
        result: Json = self._send("GET", f"/pulls/{number}")
        return result

    def create_pull(self, *, title: str, head: str, base: str, body: str, draft: bool = False) -> Json:
        check(self.caller, Action.OPEN_PR, branch=head)
        payload = {
            "title": title,
            "head": head,
            "base": base,
            "body": tagged(self.caller, body),
            "draft": draft,
        }
        result: Json = self._send("POST", "/pulls", json=payload)
        return result

    def list_pull_files(self, number: int) -> list[Json]:
        check(self.caller, Action.READ)
        return self._list(f"/pulls/{number}/files")

    def list_reviews(self, number: int) -> list[Json]:
        check(self.caller, Action.READ)
        return self._list(f"/pulls/{number}/reviews")

    def create_review(
        self, number: int, event: ReviewEvent, body: str, *, commit_id: str | None = None
    ) -> Json:
        check(self.caller, REVIEW_EVENT_ACTIONS[event])
        payload: Json = {"event": event, "body": tagged(self.caller, body)}
        if commit_id is not None:
            payload["commit_id"] = commit_id
        result: Json = self._send("POST", f"/pulls/{number}/reviews", json=payload)
        return result

    def merge_pull(
        self,
        number: int,
        *,
        consent: MergeConsent,
        method: Literal["merge", "squash", "rebase"] = "squash",
        sha: str | None = None,
    ) -> Json:
        check(self.caller, Action.MERGE, pr_number=number, consent=consent)
        payload: Json = {"merge_method": method}
        if sha is not None:
            payload["sha"] = sha
        result: Json = self._send("PUT", f"/pulls/{number}/merge", json=payload)
        return result

    def revert_pull(self, number: int, *, node_id: str, title: str, body: str) -> Json:
        """Open the revert of merged pull request ``number`` (GraphQL ``node_id``): GitHub commits
        the revert onto its base, on branch ``revert-<number>-<head ref>``, and opens a pull
        request from it (``number``, ``headRefName``, ``url``). There is no REST endpoint for it.

        A mutation: GitHub applying it and not answering raises MaybeAppliedError, and sent again
        it is refused (the branch exists); the caller looks the pull request up by its branch
        (:meth:`find_pull`). It opens a pull request, gated as any other (never merged here)."""
        check(self.caller, Action.OPEN_PR)
        data = self._graphql(
            REVERT_PULL_REQUEST,
            {"input": {"pullRequestId": node_id, "title": title, "body": tagged(self.caller, body)}},
            read=False,
        )
        opened = (data.get("revertPullRequest") or {}).get("revertPullRequest")
        if not isinstance(opened, dict) or not opened.get("number"):
            raise GraphQLError(200, f"GitHub opened no revert of #{number}", method="POST", path="graphql")
        return opened

    # --- merge queues (GitHub's GraphQL: there is no REST endpoint for them) -------------------
    def branch_requires_merge_queue(self, branch: str) -> bool:
        """Whether the rules that apply to ``branch`` (rulesets) require a merge queue."""
        check(self.caller, Action.READ)
        rules = self._list(f"/rules/branches/{quote(branch, safe='')}")
        return any(rule.get("type") == "merge_queue" for rule in rules)

    def merge_queue_entry(self, number: int) -> tuple[str, Json | None]:
        """Pull request ``number``'s node id and its merge queue entry (None: not queued).

        The entry: ``id``, ``state``, ``position``, ``enqueuedAt``, ``enqueuer`` (``__typename``
        and ``login``: a GitHub App's bot is a ``Bot`` named by its slug) and ``headCommit.oid``."""
        check(self.caller, Action.READ)
        owner, _, name = self.repo.partition("/")
        data = self._graphql(MERGE_QUEUE_ENTRY, {"owner": owner, "name": name, "number": number}, read=True)
        pull = (data.get("repository") or {}).get("pullRequest")
        if not isinstance(pull, dict):
            raise NotFoundError(
                404, f"no pull request #{number} in {self.repo}", method="POST", path="graphql"
            )
        entry = pull.get("mergeQueueEntry")
        return str(pull.get("id") or ""), entry if isinstance(entry, dict) else None

    def enqueue_pull(self, number: int, *, node_id: str, consent: MergeConsent, expected_head: str) -> Json:
        """Put pull request ``number`` (GraphQL ``node_id``) in its base's merge queue, pinned to
        ``expected_head`` (GitHub refuses it if the head moved): the merge queue entry.

        A mutation: GitHub applying it and not answering raises MaybeAppliedError, and sent again
        it is refused (already queued); the caller looks the entry up (:meth:`merge_queue_entry`)."""
        check(self.caller, Action.ENQUEUE_MERGE, pr_number=number, consent=consent)
        data = self._graphql(
            ENQUEUE_PULL_REQUEST,
            {"input": {"pullRequestId": node_id, "expectedHeadOid": expected_head}},
            read=False,
        )
        entry = (data.get("enqueuePullRequest") or {}).get("mergeQueueEntry")
        return entry if isinstance(entry, dict) else {}

    def dequeue_pull(self, number: int, *, node_id: str) -> None:
        """Take pull request ``number`` (GraphQL ``node_id``) out of the merge queue; not queued
        (any more) is fine: sent twice, the second is refused as such."""
        check(self.caller, Action.DEQUEUE_MERGE)
        try:
            self._graphql(DEQUEUE_PULL_REQUEST, {"input": {"id": node_id}}, read=False)
        except (GraphQLError, MaybeAppliedError):
            # Refused, or applied without an answer: out of the queue now is what was asked.
            _, entry = self.merge_queue_entry(number)
            if entry is not None:
                raise

    def update_pull_branch(self, number: int, *, head: str, expected_head_sha: str | None = None) -> Json:
        """Merge the base into pull request ``number``, whose head branch is ``head``.

        ``head`` is the caller's claim: a dev's is checked first, then against the
        pull request itself, so naming its own branch cannot update another's PR.
        """
        check(self.caller, Action.UPDATE_PR_BRANCH, branch=head)
        if self.caller.kind is CallerKind.DEV:
            pull = self._send("GET", f"/pulls/{number}")
            ref = str(pull["head"]["ref"])
            head_repo = (pull["head"].get("repo") or {}).get("full_name")
            check(
                self.caller,
                Action.UPDATE_PR_BRANCH,
                branch=ref if head_repo == self.repo else f"{head_repo}:{ref}",
            )
        payload: Json = {} if expected_head_sha is None else {"expected_head_sha": expected_head_sha}
        result: Json = self._send("PUT", f"/pulls/{number}/update-branch", json=payload)
        return result
