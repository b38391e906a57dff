"""Merge queues: a branch whose rules require one, GitHub's GraphQL for it, merge groups.

A test (or the demo) makes a branch require a merge queue (:meth:`MergeQueueOps.require_merge_queue`,
a ruleset's ``merge_queue`` rule); then GitHub's REST merge of a pull request into it answers
405 "Changes must be made through the merge queue" (:mod:`.pulls`), and ``GET
/repos/{owner}/{repo}/rules/branches/{branch}`` lists the rule. ``POST /graphql`` answers the
three operations GitHub has for the queue and nothing else (there is no REST endpoint for them):

- ``enqueuePullRequest(input: $input)``: refused when ``expectedHeadOid`` is not the head, when the
  pull request is queued already, closed, or its branch protection is not met; the entry records
  its enqueuer (a GitHub App's bot is a ``Bot`` whose GraphQL ``login`` has no ``[bot]``);
- ``dequeuePullRequest(input: $input)``: refused when the pull request is not queued;
- ``repository(owner:, name:) { pullRequest(number:) { id headRefOid mergeQueueEntry {...} } }``;

and, beside them, ``revertPullRequest(input: $input)`` (:mod:`.reverts`).

The answers are GitHub's shapes, but every field a caller may select is sent whatever it selected
(the sandbox parses no selection sets): a caller must not rely on a field it did not ask for. Errors
are GitHub's: HTTP 200 with ``errors`` (``type``, ``path``, ``message``) and the field null.

The queue builds one group at a time (``max_entries_to_build`` 1): the first entry's pull request
merged onto its base as ``gh-readonly-queue/<base>/pr-<n>-<head sha>``, then ``merge_group``
``checks_requested``. When every check the base's protection requires has succeeded on the
group's head, the base moves to it, the pull request is closed as merged by
``github-merge-queue[bot]`` and the group ``destroyed`` (``merged``); a required check that
fails, or new commits on the pull request, take it out of the queue (``destroyed``,
``dequeued``); a base that moved meanwhile rebuilds the group (``invalidated``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from squadron.local.git_store import GitStoreError
from squadron.local.sandbox import grants
from squadron.local.sandbox.base import Json, Repo, github_now
from squadron.local.sandbox.pulls import PullOps
from squadron.local.sandbox.reverts import REVERT_INPUT, RevertRefusedError, revert_pull_request

#: The account GitHub's merge queue acts as (it merges the pull requests of its groups).
MERGE_QUEUE_BOT = "github-merge-queue[bot]"
QUEUE_PREFIX = "gh-readonly-queue"
#: Check conclusions and status states that fail a merge group.
_FAILED = frozenset({"failure", "error", "cancelled", "timed_out", "action_required", "startup_failure"})
#: The input fields of GitHub's two mutations (schema.docs.graphql).
_INPUTS = {
    "enqueuePullRequest": (
        "EnqueuePullRequestInput",
        {"clientMutationId", "expectedHeadOid", "jump", "pullRequestId"},
    ),
    "dequeuePullRequest": ("DequeuePullRequestInput", {"clientMutationId", "id"}),
    "revertPullRequest": REVERT_INPUT,
}
_MUTATION = re.compile(
    r"^\s*mutation\b[^{]*\{\s*(enqueuePullRequest|dequeuePullRequest|revertPullRequest)\s*\(\s*input\s*:\s*\$(\w+)\s*\)"
)
_ENTRY_QUERY = re.compile(
    r"^\s*query\b[^{]*\{\s*repository\s*\(\s*owner\s*:\s*\$(\w+)\s*,\s*name\s*:\s*\$(\w+)\s*\)\s*\{\s*"
    r"pullRequest\s*\(\s*number\s*:\s*\$(\w+)\s*\)\s*\{[^}]*\bmergeQueueEntry\b"
)
_DEFAULT_RULE = {
    "check_response_timeout_minutes": 60,
    "grouping_strategy": "ALLGREEN",
    "max_entries_to_build": 1,
    "max_entries_to_merge": 1,
    "merge_method": "MERGE",
    "min_entries_to_merge": 1,
    "min_entries_to_merge_wait_minutes": 0,
}


class GraphQLFault(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class MergeQueueOps(PullOps):
    def require_merge_queue(self, full_name: str, branch: str, **parameters: Any) -> None:
        """Make ``branch`` of ``full_name`` require a merge queue (a ruleset's ``merge_queue`` rule)."""
        with self._lock:
            self.repos[full_name].merge_queues[branch] = {**_DEFAULT_RULE, **parameters}

    def _op_repos__get_branch_rules(
        self, params: Json, query: Json, body: Json, caller: str
    ) -> tuple[int, Any]:
        repo = self._repo(params)
        rule = repo.merge_queues.get(params["branch"])
        if rule is None:
            return 200, []
        return 200, [
            {
                "type": "merge_queue",
                "parameters": rule,
                "ruleset_source_type": "Repository",
                "ruleset_source": repo.full_name,
                "ruleset_id": 1,
            }
        ]

    # --- GraphQL ---------------------------------------------------------------------------------

    def graphql(self, body: bytes, caller: str, credential: str = "") -> Json:
        """GitHub's answer to one GraphQL request (always HTTP 200, as GitHub answers), held to the
        presenting installation token's repositories and permissions as its REST is."""
        try:
            request = json.loads(body or b"{}")
            query = str(request.get("query") or "")
            variables = request.get("variables") or {}
            if not isinstance(variables, dict):
                raise GraphQLFault("INVALID", "variables must be an object")
        except (ValueError, AttributeError):
            return {"errors": [{"message": "Problems parsing JSON"}]}
        if (mutation := _MUTATION.match(query)) is not None:
            name, variable = mutation.groups()
            with self._lock:
                try:
                    payload = self._mutate(name, variables.get(variable), caller, credential)
                except GraphQLFault as fault:
                    return {
                        "data": {name: None},
                        "errors": [{"type": fault.kind, "path": [name], "message": fault.message}],
                    }
            return {"data": {name: payload}}
        if (found := _ENTRY_QUERY.match(query)) is not None:
            owner, name, number = (variables.get(v) for v in found.groups())
            with self._lock:
                repo = self.repos.get(f"{owner}/{name}")
                refused = None if repo is None else self._graphql_fault(credential, repo, mutation=False)
                if refused is not None and refused.kind == "FORBIDDEN":
                    return {
                        "data": {"repository": None},
                        "errors": [
                            {"type": refused.kind, "path": ["repository"], "message": refused.message}
                        ],
                    }
                if repo is None or refused is not None:
                    return {
                        "data": {"repository": None},
                        "errors": [
                            {
                                "type": "NOT_FOUND",
                                "path": ["repository"],
                                "message": f"Could not resolve to a Repository with the name '{owner}/{name}'.",
                            }
                        ],
                    }
                pr = repo.pulls.get(number) if isinstance(number, int) else None
                pull = None
                if pr is not None:
                    entry = self._entry(repo, int(pr["number"]))
                    pull = {
                        "id": pr["node_id"],
                        "number": number,
                        "headRefOid": pr["head"]["sha"],
                        "mergeQueueEntry": self._entry_json(repo, entry) if entry is not None else None,
                    }
                return {"data": {"repository": {"pullRequest": pull}}}
        return {
            "errors": [
                {
                    "message": "the sandbox answers enqueuePullRequest, dequeuePullRequest, revertPullRequest and a pull "
                    "request's mergeQueueEntry only (each with its input in one variable)"
                }
            ]
        }

    def _graphql_fault(self, credential: str, repo: Repo, *, mutation: bool) -> GraphQLFault | None:
        """What GitHub's GraphQL answers an installation token on ``repo`` it may not use: a private
        repository it does not reach is not there (NOT_FOUND), a public one is read as anyone may
        and never written, and a permission the token lacks is FORBIDDEN."""
        if credential not in self.tokens:
            return None  # a person
        if not self.reaches(credential, repo.full_name):
            if repo.private:
                return GraphQLFault("NOT_FOUND", "")
            if mutation:
                return GraphQLFault("FORBIDDEN", grants.FORBIDDEN)
        needs, write = grants.graphql_need(mutation)
        held = self.token_permissions.get(credential)
        if held is not None and not grants.allows(held, needs, write):
            return GraphQLFault("FORBIDDEN", grants.FORBIDDEN)
        return None

    def _mutate(self, name: str, given: Any, caller: str, credential: str = "") -> Json:
        type_name, fields = _INPUTS[name]
        if not isinstance(given, dict):
            raise GraphQLFault("INVALID", f"Variable $input of type {type_name}! was provided invalid value")
        unknown = sorted(set(given) - fields)
        if unknown:
            raise GraphQLFault(
                "INVALID",
                f"Variable $input of type {type_name}! was provided invalid value for {unknown[0]} "
                f"(Field is not defined on {type_name})",
            )
        node = given.get("id") if name == "dequeuePullRequest" else given.get("pullRequestId")
        repo, pr = self._pull_by_node(str(node or ""))
        refused = self._graphql_fault(credential, repo, mutation=True)
        if refused is not None and refused.kind == "NOT_FOUND":
            raise GraphQLFault("NOT_FOUND", f"Could not resolve to a node with the global id of '{node}'")
        if refused is not None:
            raise refused
        number = int(pr["number"])
        if name == "revertPullRequest":  # .reverts
            try:
                return revert_pull_request(self._op_pulls__create, repo, pr, given, caller)
            except RevertRefusedError as exc:
                raise GraphQLFault("UNPROCESSABLE", str(exc)) from exc
        if name == "dequeuePullRequest":
            queued = self._entry(repo, number)
            if queued is None:
                raise GraphQLFault("UNPROCESSABLE", "The pull request is not in the merge queue.")
            shown = self._entry_json(repo, queued)
            self._leave(repo, queued, reason="dequeued", by=caller)
            self._advance(repo, queued["base"])
            return {"clientMutationId": given.get("clientMutationId"), "mergeQueueEntry": shown}
        self._refresh_pull(repo, pr)
        if pr["state"] != "open":
            raise GraphQLFault("UNPROCESSABLE", "Pull request is not open.")
        if not self._queue_required(repo, pr["base"]["ref"]):
            raise GraphQLFault("UNPROCESSABLE", "The merge queue is not enabled for this branch.")
        if self._entry(repo, number) is not None:
            raise GraphQLFault("UNPROCESSABLE", "Pull request is already in the merge queue.")
        expected = given.get("expectedHeadOid")
        if expected is not None and expected != pr["head"]["sha"]:
            raise GraphQLFault("UNPROCESSABLE", "Head branch was modified. Review and try again.")
        if pr["mergeable_state"] == "dirty":
            raise GraphQLFault("UNPROCESSABLE", "Pull request has merge conflicts.")
        blocked = self._protection_blocks(repo, pr)
        if blocked:
            raise GraphQLFault("UNPROCESSABLE", f"Repository rule violations found: {blocked}")
        entry: Json = {
            "id": f"MQE_{repo.id}_{number}_{next(self._ids)}",
            "number": number,
            "base": pr["base"]["ref"],
            "head_sha": pr["head"]["sha"],
            "enqueuer": caller,
            "enqueued_at": github_now(),
            "jump": bool(given.get("jump")),
            "state": "QUEUED",
            "group": None,
        }
        if entry["jump"]:
            repo.queue.insert(0, entry)
        else:
            repo.queue.append(entry)
        shown = self._entry_json(repo, entry)
        self._advance(repo, entry["base"])
        return {"clientMutationId": given.get("clientMutationId"), "mergeQueueEntry": shown}

    def _pull_by_node(self, node: str) -> tuple[Repo, Json]:
        for repo in self.repos.values():
            for pr in repo.pulls.values():
                if pr.get("node_id") == node:
                    return repo, pr
        raise GraphQLFault("NOT_FOUND", f"Could not resolve to a node with the global id of '{node}'")

    def _entry(self, repo: Repo, number: int) -> Json | None:
        return next((e for e in repo.queue if e["number"] == number), None)

    def _entry_json(self, repo: Repo, entry: Json) -> Json:
        """A MergeQueueEntry as GitHub's GraphQL shows it."""
        same_base = [e for e in repo.queue if e["base"] == entry["base"]]
        enqueuer = entry["enqueuer"]
        bot = enqueuer.endswith("[bot]")
        return {
            "id": entry["id"],
            "state": entry["state"],
            "position": same_base.index(entry) + 1 if entry in same_base else 0,
            "enqueuedAt": entry["enqueued_at"],
            "jump": entry["jump"],
            "solo": False,
            # GraphQL names a GitHub App's bot by its slug, without REST's "[bot]".
            "enqueuer": {"__typename": "Bot" if bot else "User", "login": enqueuer.removesuffix("[bot]")},
            "headCommit": {"oid": entry["head_sha"]},
            "baseCommit": {"oid": (entry["group"] or {}).get("base_sha")},
            "pullRequest": {"number": entry["number"], "id": repo.pulls[entry["number"]]["node_id"]},
        }

    # --- the queue ---------------------------------------------------------------------------------

    def _advance(self, repo: Repo, base: str) -> None:
        """Build the group of the first entry into ``base`` if it has none yet, then judge it."""
        first = next((e for e in repo.queue if e["base"] == base), None)
        if first is None or first["group"] is not None:
            return
        pr = repo.pulls[first["number"]]
        base_sha = repo.store.sha(f"refs/heads/{base}")
        if base_sha is None:
            return
        method = str(repo.merge_queues.get(base, _DEFAULT_RULE)["merge_method"]).lower()
        try:
            tree = repo.store.git("merge-tree", "--write-tree", base_sha, first["head_sha"]).splitlines()[0]
        except GitStoreError:  # a conflict with the base: out of the queue, no group was made
            repo.queue.remove(first)
            self._advance(repo, base)
            return
        parents = ["-p", base_sha, "-p", first["head_sha"]] if method == "merge" else ["-p", base_sha]
        message = f"Merge pull request #{first['number']} ({pr['title']})"
        head = repo.store.git("commit-tree", tree, *parents, "-m", message)
        branch = f"{QUEUE_PREFIX}/{base}/pr-{first['number']}-{first['head_sha']}"
        repo.store.git("update-ref", f"refs/heads/{branch}", head)
        first["group"] = {"head_sha": head, "head_ref": f"refs/heads/{branch}", "base_sha": base_sha}
        first["state"] = "AWAITING_CHECKS"
        self.emit(
            repo,
            "merge_group",
            "checks_requested",
            {"merge_group": self._group_json(repo, first)},
            MERGE_QUEUE_BOT,
        )
        self._judge(repo, first)

    def _group_json(self, repo: Repo, entry: Json) -> Json:
        group = entry["group"]
        return {
            "head_sha": group["head_sha"],
            "head_ref": group["head_ref"],
            "base_sha": group["base_sha"],
            "base_ref": f"refs/heads/{entry['base']}",
            "head_commit": {
                "id": group["head_sha"],
                "tree_id": repo.store.git("rev-parse", f"{group['head_sha']}^{{tree}}"),
                "message": f"Merge pull request #{entry['number']}",
                "timestamp": entry["enqueued_at"],
                "author": {"name": "GitHub", "email": "noreply@github.com"},
                "committer": {"name": "GitHub", "email": "noreply@github.com"},
            },
        }

    def _judge(self, repo: Repo, entry: Json) -> None:
        """Merge the entry's group when every required check succeeded on its head; out when one failed."""
        group = entry["group"]
        rules = repo.protections.get(entry["base"]) or {}
        required = [c["context"] for c in (rules.get("required_status_checks") or {}).get("checks") or []]
        outcomes = {s["context"]: s["state"] for s in reversed(repo.statuses.get(group["head_sha"], []))}
        outcomes.update(
            {
                r["name"]: r.get("conclusion") or r["status"]
                for r in repo.check_runs.get(group["head_sha"], [])
            }
        )
        if any(outcomes.get(context) in _FAILED for context in required):
            self._leave(repo, entry, reason="dequeued", by=MERGE_QUEUE_BOT)
            self._advance(repo, entry["base"])
            return
        if any(outcomes.get(context) != "success" for context in required):
            return  # still waiting
        if repo.store.sha(f"refs/heads/{entry['base']}") != group["base_sha"]:  # the base moved on
            self._destroy(repo, entry, "invalidated")
            entry["group"], entry["state"] = None, "QUEUED"
            self._advance(repo, entry["base"])
            return
        repo.store.git("update-ref", f"refs/heads/{entry['base']}", group["head_sha"], group["base_sha"])
        repo.queue.remove(entry)
        pr = repo.pulls[entry["number"]]
        self._refresh_pull(repo, pr)
        self._merged(repo, pr, group["head_sha"], MERGE_QUEUE_BOT)
        self._destroy(repo, entry, "merged")
        self._advance(repo, entry["base"])

    def _leave(self, repo: Repo, entry: Json, *, reason: str, by: str) -> None:
        """The entry out of the queue (its group, if built, destroyed for ``reason``)."""
        repo.queue.remove(entry)
        if entry["group"] is not None:
            self._destroy(repo, entry, reason, by=by)

    def _destroy(self, repo: Repo, entry: Json, reason: str, *, by: str = MERGE_QUEUE_BOT) -> None:
        shown = self._group_json(repo, entry)
        repo.store.delete_branch(entry["group"]["head_ref"].removeprefix("refs/heads/"))
        self.emit(repo, "merge_group", "destroyed", {"merge_group": shown, "reason": reason}, by)

    # --- the hooks -----------------------------------------------------------------------------------

    def _checks_changed(self, repo: Repo, sha: str) -> None:
        for entry in list(repo.queue):
            if entry["group"] is not None and entry["group"]["head_sha"] == sha:
                self._judge(repo, entry)

    def _head_moved(self, repo: Repo, pr: Json) -> None:
        entry = self._entry(repo, int(pr["number"]))
        if entry is not None and entry["head_sha"] != pr["head"]["sha"]:
            self._leave(repo, entry, reason="dequeued", by=MERGE_QUEUE_BOT)
            self._advance(repo, entry["base"])
