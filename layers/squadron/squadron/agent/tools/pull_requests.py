"""Pull requests: push the agent's branch, open a PR, read it, review it, post the role's status.

The App's own pull request, review and status webhooks are dropped at GitHub's ingress: the
gateway tells the router instead.
"""

from __future__ import annotations

from typing import Any

from squadron.agent.tools.base import BaseTools
from squadron.agent.tools.params import GitPush, NoParams, OpenPr, PostStatus, SubmitReview
from squadron.domain.permissions import REVIEW_EVENT_ACTIONS, Action, check
from squadron.domain.trust import issue_text, one_line

#: The task's endings that take the agent out of work while its session still runs (asleep on a
#: blocker, or with humans): nothing is pushed after them but the host's one save.
WINDING_DOWN = frozenset({"sleep", "escalate"})
#: The most diff text read_pull_request hands the model; the rest is read from the checkout.
PATCH_BUDGET = 60_000


class PullRequestTools(BaseTools):
    def git_push(self, params: GitPush) -> str:
        return self._push(params.message or "Work in progress")[1]

    def _push(self, message: str) -> tuple[bool, str]:
        """Commit everything and push the agent's own branch: (the branch is on the remote, words)."""
        wc = self.working_copy
        branch = self.agent.branch
        if wc is None or branch is None:
            return False, "You have no working copy of your own to push."
        check(self.github.caller, Action.PUSH, branch=branch)
        if self.state.ending in WINDING_DOWN:
            # Reported blocked (the router puts the agent to sleep) or handed to humans: the task
            # winds down, and its work is saved once, by the host after the session
            # (squadron.domain.launches.check_push says why once); a push now would be a second
            # save whose report the router, the agent no longer working, refuses.
            return False, (
                f"Not pushed: you ended your work ({self.state.reason}). Squadron pushes your work "
                f"in progress to {branch} once, when your session ends: end your turn now."
            )
        current = wc.current_branch()
        if current != branch:
            return False, (
                f"Your working copy is on {current}, not your branch {branch}: "
                f"check out {branch} (bring your changes with you) and push again."
            )
        sha = wc.commit_all(message)
        result = wc.push(self.github.caller, branch)
        if result.secret:  # what it pushes would leak a secret: humans check it
            self.state.ending = "escalate"
            self.state.reason = f"a push was {result.detail}"
        committed = f"Committed {sha[:7]}. " if sha else ""
        if result.pushed and self.agent.pr_number is not None:
            # New commits on an open PR: the App's own synchronize webhook is dropped at the
            # ingress, so the router hears it from the gateway, which reads the PR from GitHub.
            self.door.pushed()
        on_remote = result.pushed or result.detail == "already up to date"
        return on_remote, f"{committed}{result.detail[:1].upper()}{result.detail[1:]} ({branch})."

    def open_pr(self, params: OpenPr) -> str:
        branch = self.agent.branch or ""
        check(self.github.caller, Action.OPEN_PR, branch=branch)
        pushed = ""
        if self.working_copy is not None:
            on_remote, said = self._push(params.title)
            if not on_remote:
                return f"Not opened: your branch could not be pushed. {said}"
            pushed = said + " "
        pr = self.writes.create_pull(
            title=params.title,
            head=branch,
            base=params.base or self.default_branch,
            body=params.body,
            draft=params.draft,
        )
        # The gateway tells the router (the App's own webhooks are dropped at the ingress): the
        # PR is linked to the issue and its reviewers start.
        return f"{pushed}Opened PR #{pr['number']} from {branch}."

    def read_pull_request(self, params: NoParams) -> str:
        pr = self._pr()
        if isinstance(pr, str):
            return pr
        files = self.github.list_pull_files(int(pr["number"]))
        # Its title, description and head branch's name are its author's words (a fork's branch
        # is named as its author likes); the diff is the code under review.
        author = self.authors()(pr.get("user"))
        text = issue_text(
            str(pr.get("title") or ""),
            str(pr.get("body") or ""),
            author,
            None,
            self.reads,
            what="pull request",
        )
        head = one_line("head branch name", str(pr.get("head", {}).get("ref") or ""), author, self.reads)
        lines = [
            f"PR #{pr['number']} [{pr.get('state')}] {text.title}",
            f"{head} -> {pr.get('base', {}).get('ref')} at {pr.get('head', {}).get('sha')}",
            text.body,
            f"{len(files)} changed file(s):",
        ]
        budget = PATCH_BUDGET
        for item in files:
            header = (
                f"--- {item.get('filename')} ({item.get('status', 'modified')}, "
                f"+{item.get('additions', 0)} -{item.get('deletions', 0)})"
            )
            patch = str(item.get("patch") or "(no textual diff: binary or too large; read the file)")
            if len(patch) > budget:
                patch = (
                    patch[: max(budget, 0)] + "\n(diff cut here: read the remaining files from your checkout)"
                )
            budget -= len(patch)
            lines += [header, patch]
        return "\n".join(lines)

    def _pr(self) -> dict[str, Any] | str:
        if self.agent.pr_number is None:
            return "You have no pull request to review."
        pr: dict[str, Any] = self.github.get_pull(self.agent.pr_number)
        return pr

    def submit_review(self, params: SubmitReview) -> str:
        check(self.github.caller, REVIEW_EVENT_ACTIONS[params.event])  # before reading anything
        pr = self._pr()
        if isinstance(pr, str):
            return pr
        sha = str(pr.get("head", {}).get("sha") or "") or None
        event, body, note = params.event, params.body, ""
        if event != "COMMENT" and (pr.get("user") or {}).get("login") == self.repo_config.bot_login:
            # GitHub refuses an approval or change request on the App's own pull request: the
            # verdict is a comment-review, and the squadron/<role> status carries it to the gate.
            event, body = "COMMENT", f"**{params.event.replace('_', ' ').title()}**: {params.body}"
            note = " as a comment (GitHub does not let the App approve its own PR); post_status carries the verdict"
        # The gateway tells the router (the App's own review webhook is dropped at the ingress):
        # the dev agent hears of requested changes, and the merge gate judges the PR again.
        review = self.writes.create_review(
            int(pr["number"]), event, body, commit_id=sha, verdict=params.event
        )
        return f"Review {review.get('id')} submitted on PR #{pr['number']} ({params.event}){note}."

    def post_status(self, params: PostStatus) -> str:
        context = f"squadron/{self.agent.role}"
        check(self.github.caller, Action.POST_STATUS, status_context=context)  # before reading anything
        pr = self._pr()
        if isinstance(pr, str):
            return pr
        sha = str(pr.get("head", {}).get("sha") or "")
        if not sha:
            return f"PR #{pr['number']} has no head commit yet."
        # The gateway tells the router (dropped at the ingress as the App's own): the merge gate
        # judges the PR again.
        self.writes.create_status(sha, state=params.state, context=context, description=params.description)
        return f"Posted {context} = {params.state} on {sha[:7]}."
