"""Working an approved change set in every repository, and its one combined check
(docs/change-sets.md, "Working a set"; :mod:`squadron.domain.change_set_steps` decides the words).

- :meth:`ChangeSetWork.start`: ``approved`` -> ``working`` (stored on the version read, with its
  events), then a member issue, written by the App and keyed by the set and the repository, in
  every repository but the origin (the origin works on its own issue), each handed to that
  repository's dev role through events.fifo as the framework's assignment, so the router starts
  its dev agent under that repository's roles, configuration and containment, on the set's branch
  (the member marker chooses it). Safe to call again: a set already working opens nothing twice.
- :meth:`ChangeSetWork.pull_request`: the App's pull request from the set's branch of a member
  repository (an agent opened it, or pushed to it) is recorded, the combined check posted, and
  the other members' issues told what was pushed (keyed by the head sha).
- :meth:`ChangeSetWork.gate_judged`: the merge gate's hook (:class:`squadron.shell.merge_gate.MergeGate`):
  a member's own verdict is recorded on the set, the combined check posted on every member, and
  the gate's decision returned without its merge: a member merges only with its whole set, in
  order (``on_ready``, joined by the set's merging).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from squadron.adapters.github.keyed import once
from squadron.domain import change_sets as domain
from squadron.domain.agents import ConflictError
from squadron.domain.approval import MERGE_CONTEXT
from squadron.domain.change_set_events import events_of
from squadron.domain.change_set_steps import (
    SET_MERGES,
    WAITS_FOR_SET,
    held_merge_status,
    member_issue_body,
    member_issue_key,
    member_issue_title,
    member_marker,
    member_pull_request,
    posted_version,
    pushed_key,
    pushed_notice,
    set_of_branch,
    started_key,
    started_notice,
    status_of,
    versioned_check,
)
from squadron.domain.change_sets import CHECK_NAME, ChangeSet, ChangeSetRefusedError, GateVerdict, SetState
from squadron.domain.commands import AgentAssignedIssue
from squadron.domain.effects import marked
from squadron.domain.event_fields import IssueFields
from squadron.domain.event_trimming import issue_fields
from squadron.domain.events import EventEnvelope, command_envelope
from squadron.domain.merge_gate import GateDecision, author_of
from squadron.domain.routing.normalize import as_webhook
from squadron.ports import EventQueue
from squadron.registry_ports import ChangeSets

logger = logging.getLogger(__name__)

Json = dict[str, Any]
#: How often a step is tried again when another router stored the set first.
ATTEMPTS = 5
#: What a keyed lookup reads before the set existed (clocks differ a little).
LOOKBACK = timedelta(minutes=5)
#: The states a member's pull request and gate are recorded in.
WORKING = (SetState.WORKING, SetState.READY)


def _now() -> datetime:
    return datetime.now(UTC)


class WorkClient(Protocol):
    """The framework's client of one repository (``GitHubClient`` satisfies it)."""

    def get_issue(self, number: int) -> Json: ...
    def create_issue(self, title: str, body: str, *, labels: Any = (), assignees: Any = ()) -> Json: ...
    def find_issue(
        self, key: str, login: str | None, since: datetime, *, pulls: bool = False
    ) -> Json | None: ...
    def comment(self, number: int, body: str) -> Json: ...
    def find_comment(self, number: int, key: str, login: str | None, since: datetime) -> Json | None: ...
    def get_pull(self, number: int) -> Json: ...
    def get_combined_status(self, ref: str) -> Json: ...
    def create_status(self, sha: str, *, state: Any, context: str, description: str = "") -> Json: ...


class WorkGitHub(Protocol):
    """Framework clients per (installation, repository) (``AppGitHub`` satisfies it)."""

    def client(self, installation_id: int | None, repo_full_name: str) -> WorkClient: ...


def _no_merging_yet(change_set: ChangeSet) -> None:
    # TODO(change sets): the lead joins the set's merging (shell/change_set_merging.py) here.
    logger.info("change set %s is ready: its merging is not wired here", change_set.id)


class ChangeSetWork:
    def __init__(
        self,
        *,
        registry: ChangeSets,
        github: WorkGitHub,
        queue: EventQueue,
        bot_login: str,
        clock: Callable[[], datetime] = _now,
        on_ready: Callable[[ChangeSet], object] = _no_merging_yet,
    ) -> None:
        self.registry = registry
        self.github = github
        self.queue = queue
        self.bot_login = bot_login
        self.clock = clock
        #: Called with the set each time a step leaves it ``ready`` (its merging starts there).
        self.on_ready = on_ready

    # --- starting ----------------------------------------------------------------------------

    def begin(self, change_set: ChangeSet) -> None:
        """:meth:`start` when the writers' approvals left the set ``approved`` (the router's
        :class:`~squadron.shell.change_set_commands.ChangeSetCommands`), its steps' events
        correlated with the set; called again for the same set, it opens nothing twice."""
        self.start(change_set, correlation_id=change_set.id)

    def start(self, change_set: ChangeSet, *, correlation_id: str) -> ChangeSet:
        """Start an ``approved`` set's work (again, for a set already ``working`` or ``ready``:
        what an earlier attempt left is done, nothing twice). Refused for a set not approved yet."""

        def decide(found: ChangeSet) -> ChangeSet | None:
            if found.state is SetState.APPROVED:
                return domain.start_work(found, self.clock())
            if found.state in (SetState.PROPOSED,):
                raise ChangeSetRefusedError(f"change set {found.id} is {found.state}: it does not start")
            return None

        current = self._step(change_set.id, decide, correlation_id)
        if current.state not in WORKING:
            return current  # merging or over: its issues were opened when it started
        issues: dict[str, int] = {}
        for member in current.members:
            if member.repository.lower() == current.origin_repository.lower():
                continue
            issues[member.repository] = self._member_issue(current, member.repository)
        self._say_started(current, issues)
        for member in current.members:
            if member.pr_number is None:  # a member with its pull request open is at work already
                self._hand_over(current, member.repository, issues.get(member.repository))
        return current

    def _member_issue(self, change_set: ChangeSet, repository: str) -> int:
        """The member issue of ``repository``: found by its key, else opened (once, even when
        GitHub applies the write and loses its answer)."""
        client = self.github.client(change_set.installation_id, repository)
        key = member_issue_key(change_set.id, repository)
        since = change_set.created_at - LOOKBACK

        def find() -> Json | None:
            return client.find_issue(key, self.bot_login, since)

        found = find()
        if found is None:
            body = marked(member_issue_body(change_set, repository), key)
            found = once(lambda: client.create_issue(member_issue_title(change_set, repository), body), find)
        return int(found["number"])

    def _say_started(self, change_set: ChangeSet, issues: dict[str, int]) -> None:
        client = self.github.client(change_set.installation_id, change_set.origin_repository)
        self._keyed_comment(
            client,
            change_set,
            change_set.issue,
            started_key(change_set.id),
            started_notice(change_set, issues),
        )

    def _hand_over(self, change_set: ChangeSet, repository: str, number: int | None) -> None:
        """The framework's assignment of the member's issue to the App: the router starts that
        repository's dev agent on it (on the set's branch: the marker in these fields is the
        framework's, as the command is). The same command id on every attempt (events.fifo
        drops a repeat; the router discards an assignment of an issue whose agent works)."""
        member = change_set.member(repository)
        marker = member_marker(change_set.id)
        if number is None:  # the origin: its own issue, as GitHub shows it, with the framework's marker
            read = self.github.client(change_set.installation_id, repository).get_issue(change_set.issue)
            issue = issue_fields(read).model_copy(update={"body": marker, "body_truncated": False})
        else:
            issue = IssueFields(
                number=number,
                title=member_issue_title(change_set, repository)[:256],
                body=marker,
                state="open",
                author=self.bot_login,
            )
        self.queue.send(
            command_envelope(
                AgentAssignedIssue(issue=issue),
                repository={"id": member.repo_id, "full_name": member.repository, "default_branch": None},
                installation_id=change_set.installation_id,
                delivery_id=f"cmd-change-set-{change_set.id}-{member.repo_id}",
                now=self.clock(),
            )
        )

    # --- pull requests and pushes -------------------------------------------------------------

    def pull_request(self, event: EventEnvelope) -> ChangeSet | None:
        """A ``pull_request`` event (``opened``, ``reopened``, ``synchronize``; a webhook or an
        agent's report as the router normalises it): the member's pull request is recorded, the
        check posted, and the other members told of the push. Anything else (a fork's or a
        person's pull request from a branch named like the set's) changes nothing: None. An agent's
        report (its opened pull request, its push) is read as the webhook it stands for."""
        event = as_webhook(event, self.bot_login)
        pr = event.pull_request
        if pr is not None and event.action == "closed":
            return self.pull_request_closed(
                event.installation_id, event.repository.full_name, pr.number, pr.head_ref
            )
        if pr is None or event.action not in ("opened", "reopened", "synchronize"):
            return None
        found = self._set_of(event.installation_id, event.repository.full_name, pr.head_ref)
        if found is None:
            return None
        repository = found.member(event.repository.full_name).repository
        if not member_pull_request(
            found,
            repository,
            author=pr.author,
            head_ref=pr.head_ref,
            head_repo=pr.head_repo_full_name,
            bot_login=self.bot_login,
        ):
            logger.info("PR #%s of %s is not change set %s's: not recorded", pr.number, repository, found.id)
            return None

        def decide(current: ChangeSet) -> ChangeSet | None:
            if current.state not in WORKING or current.member(repository).pr_number is not None:
                return None
            return domain.record_pull_request(current, repository, pr.number, self.clock())

        try:
            current = self._step(found.id, decide, event.delivery_id)
        except ChangeSetRefusedError as exc:
            logger.warning(
                "change set %s: PR #%s of %s not recorded: %s", found.id, pr.number, repository, exc
            )
            return None
        if current.member(repository).pr_number != pr.number:
            logger.warning(
                "change set %s: %s has PR #%s already",
                current.id,
                repository,
                current.member(repository).pr_number,
            )
            return current
        self.post_checks(current)
        self._tell_others(current, repository, pr.head_ref, pr.head_sha, pr.number)
        return current

    def pull_request_closed(
        self, installation_id: int | None, repo: str, number: int, head_ref: str
    ) -> ChangeSet | None:
        """A ``pull_request`` ``closed`` webhook: when pull request ``number`` is a member's of a
        set still working or ready and GitHub shows it closed without merging, it is taken out of
        the set (not ready; the combined check on the others says it waits for ``repo``); a
        reopened or new App pull request from the set's branch is recorded again. Only a nudge:
        GitHub is read. A closed member of a merging set is the merging's (it fails the set)."""
        found = self._set_of(installation_id, repo, head_ref)
        if found is None or found.member(repo).pr_number != number or found.state not in WORKING:
            return None
        repository = found.member(repo).repository
        pull = self.github.client(found.installation_id, repository).get_pull(number)
        if pull.get("state") != "closed" or pull.get("merged"):
            return None

        def decide(current: ChangeSet) -> ChangeSet | None:
            if current.state not in WORKING or current.member(repository).pr_number != number:
                return None
            return domain.drop_pull_request(current, repository, number, self.clock())

        current = self._step(found.id, decide, f"closed-{repository}-{number}")
        logger.info(
            "change set %s: %s#%s was closed unmerged: not a member now", current.id, repository, number
        )
        return self.post_checks(current)

    def _tell_others(
        self, change_set: ChangeSet, repository: str, branch: str, sha: str, pr_number: int
    ) -> None:
        """One App comment on every other member's issue naming the push (keyed by its sha)."""
        text = pushed_notice(change_set, repository, branch, sha, pr_number)
        for member in change_set.members:
            if member.repository == repository:
                continue
            client = self.github.client(change_set.installation_id, member.repository)
            if member.repository == change_set.origin_repository:
                number: int | None = change_set.issue
            else:
                issue = client.find_issue(
                    member_issue_key(change_set.id, member.repository),
                    self.bot_login,
                    change_set.created_at - LOOKBACK,
                )
                number = int(issue["number"]) if issue is not None else None
            if number is None:
                logger.warning(
                    "change set %s: no member issue in %s to tell", change_set.id, member.repository
                )
                continue
            key = pushed_key(change_set.id, repository, sha, member.repository)
            self._keyed_comment(client, change_set, number, key, text)

    def _keyed_comment(
        self, client: WorkClient, change_set: ChangeSet, number: int, key: str, text: str
    ) -> None:
        since = change_set.created_at - LOOKBACK

        def find() -> Json | None:
            return client.find_comment(number, key, self.bot_login, since)

        if find() is None:
            once(lambda: client.comment(number, marked(text, key)), find)

    # --- the merge gate's hook and the combined check ----------------------------------------

    def gate_judged(
        self, installation_id: int | None, repo: str, pr: Json, decision: GateDecision
    ) -> GateDecision:
        """The merge gate judged ``pr`` (``decision``): for a member's pull request, its verdict is
        recorded on the set, the check posted on every member, and the decision returned without
        a merge, its ``squadron/merge`` held while the set's check does not pass. Any other pull
        request's decision is returned as it is."""
        head = pr.get("head") or {}
        found = self._set_of(installation_id, repo, str(head.get("ref") or ""))
        if found is None:
            return decision
        repository = found.member(repo).repository
        if not member_pull_request(
            found,
            repository,
            author=author_of(pr),
            head_ref=str(head.get("ref") or ""),
            head_repo=(head.get("repo") or {}).get("full_name"),
            bot_login=self.bot_login,
        ):
            return decision
        number, verdict = decision.pr_number, decision.result.verdict

        def decide(current: ChangeSet) -> ChangeSet | None:
            member = current.member(repository)
            if current.state not in WORKING or member.pr_number not in (None, number):
                return None
            step = current
            if member.pr_number is None:
                step = domain.record_pull_request(step, repository, number, self.clock())
            elif member.gate == verdict:
                return None
            return domain.record_gate(step, repository, _verdict(verdict), self.clock())

        current = self._step(found.id, decide, f"gate-{repository}-{number}-{decision.head_sha}")
        self.post_checks(current)
        if current.state is SetState.READY:
            self.on_ready(current)
        held = held_merge_status(current, decision.result.status_state)
        statuses = tuple(
            replace(status, state=held[0], description=held[1])
            if held is not None and status.context == MERGE_CONTEXT and status.sha == decision.head_sha
            else status
            for status in decision.statuses
        )
        logger.info("PR #%s of %s is change set %s's: the gate does not merge it", number, repo, current.id)
        result = decision.result
        if result.merge:  # what the gate reports (the dashboard) says who merges it
            result = replace(result, merge=False, reasons=(f"change set {current.id} merges it in order",))
        return replace(decision, result=result, statuses=statuses, consent=None, delete_branch=None)

    def post_checks(self, change_set: ChangeSet) -> ChangeSet:
        """Post ``squadron/change-set`` on the head of every member's open pull request, never over
        a newer version's, and turn a ready member's ``squadron/merge`` with it; again while
        another step stored a newer version meanwhile. The set as last read."""
        current = change_set
        for _ in range(ATTEMPTS):
            check = versioned_check(current)
            for member in current.members:
                if member.pr_number is None:
                    continue
                client = self.github.client(current.installation_id, member.repository)
                pull = client.get_pull(member.pr_number)
                if pull.get("state") != "open" or pull.get("merged"):
                    continue
                sha = str((pull.get("head") or {}).get("sha") or "")
                statuses = client.get_combined_status(sha).get("statuses")
                posted = posted_version(statuses)
                if posted is None or posted < current.version:  # the same version: posted already
                    client.create_status(
                        sha, state=check.state, context=CHECK_NAME, description=check.description
                    )
                said = status_of(statuses, MERGE_CONTEXT)
                held = held_merge_status(current, "success") if member.gate == "ready" else None
                ours = said is not None and (said[1].startswith(WAITS_FOR_SET) or said[1] == SET_MERGES)
                if held is not None and ours and said != held:  # the gate held this very head ready
                    client.create_status(sha, state=held[0], context=MERGE_CONTEXT, description=held[1])
            latest = self.registry.get_change_set(current.id)
            if latest is None or latest.version <= current.version:
                return current
            current = latest
        return current

    # --- plumbing ------------------------------------------------------------------------------

    def _set_of(self, installation_id: int | None, repo: str, branch: str) -> ChangeSet | None:
        """The set whose branch ``branch`` is, when ``repo`` is one of its members in the same
        installation."""
        set_id = set_of_branch(branch)
        found = self.registry.get_change_set(set_id) if set_id is not None else None
        if found is None or found.installation_id != installation_id:
            return None
        if not any(m.repository.lower() == repo.lower() for m in found.members):
            return None
        return found

    def _step(
        self, set_id: str, decide: Callable[[ChangeSet], ChangeSet | None], correlation_id: str
    ) -> ChangeSet:
        """Read the set, decide, store the step with its events on the version read; decided
        again when another router stored it first. The set as stored (unchanged: None decided)."""
        for _ in range(ATTEMPTS):
            found = self.registry.get_change_set(set_id)
            if found is None:
                raise ChangeSetRefusedError(f"no change set {set_id}")
            after = decide(found)
            if after is None:
                return found
            try:
                self.registry.save_change_set(
                    found, after, events_of(found, after, correlation_id=correlation_id)
                )
            except ConflictError:
                continue
            return after
        raise ChangeSetRefusedError(f"change set {set_id} kept changing: try again")


def _verdict(verdict: str) -> GateVerdict:
    if verdict == "ready":
        return "ready"
    return "blocked" if verdict == "blocked" else "waiting"
