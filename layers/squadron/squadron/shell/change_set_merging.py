"""A change set's merges, all or nothing (docs/change-sets.md): merge the members in dependency
order, each through the merge gate's own path; on a failed merge open revert pull requests for
what merged, newest first, and tell a person on the origin issue.

:mod:`squadron.domain.change_sets` decides each transition and :mod:`squadron.domain.change_set_merges`
the next step of a set as stored; :class:`ChangeSetMerger` carries the steps out.

**The driver is the stored set.** :meth:`ChangeSetMerger.step` reads the set, takes the one step
it names (merge the next member; open the reverts; see which reverts merged; escalate), stores
that step with its events on the version it read, and reads again, until the step is to wait.
Everything that may move a set calls it, and calling it again is harmless:

- :meth:`~ChangeSetMerger.on_ready` when the set becomes ready (it begins merging first);
- :meth:`~ChangeSetMerger.after_routing` (the router's dispatcher, after each delivery) for a
  ``pull_request`` ``closed`` webhook of a member's or a revert's pull request (their branches name the set: ``change-set/<id>``,
  ``revert-<n>-change-set/<id>``), the merge gate's echo of the App's own merge included: the
  webhook is only a nudge, the set reads GitHub for what happened;
- :meth:`~ChangeSetMerger.sweep`, which steps every set merging, failed or reverting: the
  router's dispatcher runs it for a ``{"kind": "squadron.change_sets_sweep"}`` record on
  events.fifo (:data:`SWEEP_KIND`), so a set whose router died between two steps, with no webhook
  left to nudge it, carries on at the next sweep from where it stopped.

**Exactly once.** A member merges only when the one before it is recorded merged, and only as
its gate consents now, pinned to the head its gate judged (a head that moved is not merged: the
set fails). A merge whose answer was lost (GitHub applied it, then answered 502) is read back and
recorded merged, never sent twice nor counted failed; a refusal is read back too (another router
may have merged it a moment before). A revert pull request is looked up by its branch before it
is opened. Telling a person is claimed in the registry under its key first (a conditional write:
of two routers at once one tells, the other waits for its step to be stored, and a claim left by
a router that died is taken over after :data:`TELLING`), then its comment is looked up by the key
before it is posted. Of two routers stepping at once one stores each step; the other reads the
set again and finds the step taken.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from squadron.adapters.github.errors import (
    GitHubError,
    GitHubUnavailableError,
    GraphQLError,
    MaybeAppliedError,
    RateLimitedError,
)
from squadron.adapters.github.keyed import once
from squadron.domain import change_sets as sets
from squadron.domain.agents import ConflictError
from squadron.domain.change_set_events import events_of
from squadron.domain.change_set_merges import (
    SWEEP_GROUP,
    SWEEP_KIND,
    AwaitReverts,
    Escalate,
    Merge,
    Nothing,
    OpenReverts,
    escalation_key,
    escalation_text,
    next_step,
    pull_outcome,
    refusal_reason,
    revert_body,
    revert_branch,
    revert_key,
    reverts_closed_key,
    reverts_closed_text,
    set_of_branch,
)
from squadron.domain.change_sets import ChangeSet, ChangeSetRefusedError, SetState
from squadron.domain.effects import marked
from squadron.domain.events import EventEnvelope
from squadron.domain.routing import RoutingPolicy
from squadron.registry_ports import ChangeSets, WriteClaims
from squadron.shell.merge_gate import MergeGate

logger = logging.getLogger(__name__)

Json = dict[str, Any]

#: Steps one call takes at most (each member merged, reverted, and a few more): a bound, never
#: reached by a set that behaves.
MAX_STEPS = 4 * sets.MAX_REPOSITORIES + 8
#: States a sweep steps (the others wait for a person, a gate, or are over).
MOVING = frozenset({SetState.MERGING, SetState.FAILED, SetState.REVERTING, SetState.REVERTED})
#: How long a claim to tell a person holds against another router (longer than a router's run);
#: a claim older than this with nothing recorded was left by a router that died: taken over.
TELLING = timedelta(minutes=2)


class MergerRegistry(ChangeSets, WriteClaims, Protocol):
    """The sets, and the claims that make telling a person once (``DynamoRegistry`` satisfies it)."""


def _now() -> datetime:
    return datetime.now(UTC)


class MemberGitHub(Protocol):
    """One repository as the App reaches it (``GitHubClient`` satisfies it)."""

    def get_pull(self, number: int) -> Json: ...
    def find_pull(self, head: str, key: str, login: str | None, since: datetime) -> Json | None: ...
    def revert_pull(self, number: int, *, node_id: str, title: str, body: str) -> Json: ...
    def merge_queue_entry(self, number: int) -> tuple[str, Json | None]: ...


class MergerGitHub(Protocol):
    """The App's GitHub (:class:`squadron.adapters.github.for_router.AppGitHub` satisfies it)."""

    def client(self, installation_id: int | None, repo_full_name: str) -> Any: ...
    def comment(
        self,
        installation_id: int | None,
        repo_full_name: str,
        number: int,
        body: str,
        author: str,
        *,
        key: str | None = None,
    ) -> None: ...
    def find_comment(
        self, installation_id: int | None, repo_full_name: str, number: int, key: str, since: datetime
    ) -> bool: ...
    def add_labels(
        self, installation_id: int | None, repo_full_name: str, number: int, labels: tuple[str, ...]
    ) -> None: ...
    def add_assignees(
        self, installation_id: int | None, repo_full_name: str, number: int, logins: tuple[str, ...]
    ) -> None: ...
    def find_issue(
        self,
        installation_id: int | None,
        repo_full_name: str,
        key: str,
        labels: tuple[str, ...],
        since: datetime,
    ) -> int | None: ...
    def create_issue(
        self,
        installation_id: int | None,
        repo_full_name: str,
        *,
        title: str,
        body: str,
        labels: tuple[str, ...],
        assignees: tuple[str, ...],
        key: str | None = None,
    ) -> int: ...


class ChangeSetMerger:
    """Carries out a change set's merges, reverts and escalation (module docstring)."""

    def __init__(
        self,
        *,
        registry: MergerRegistry,
        github: MergerGitHub,
        gate: MergeGate,
        policy_for: Callable[[str, int], RoutingPolicy],
        bot_login: str,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.registry = registry
        self.github = github
        #: The merge gate the router judges every pull request with: its judgement and its merge.
        self.gate = gate
        #: (repository, installation) -> its policy (escalation label, mentions, assignees, needs-human issue).
        self.policy_for = policy_for
        self.bot_login = bot_login
        self.clock = clock

    # --- what calls it ---------------------------------------------------------------------------

    def on_ready(self, change_set: ChangeSet) -> ChangeSet | None:
        """A set that became ``ready`` begins merging and merges what it can now."""
        for _ in range(MAX_STEPS):
            found = self.registry.get_change_set(change_set.id)
            if found is None or found.state is not SetState.READY:
                break  # begun already (another router), or no longer ready
            try:
                after = sets.begin_merging(found, self.clock())
            except ChangeSetRefusedError as exc:
                logger.info("change set %s does not begin merging: %s", found.id, exc)
                return found
            if self._save(found, after):
                break
        return self.step(change_set.id)

    def on_pull_request_closed(self, repository: str, pr: Mapping[str, Any]) -> ChangeSet | None:
        """A ``pull_request`` ``closed`` webhook (GitHub's pull request ``pr`` of ``repository``):
        the set its head branch names steps on (None: no set's)."""
        return self._nudged(repository, str((pr.get("head") or {}).get("ref") or ""))

    def after_routing(self, envelope: EventEnvelope) -> dict[str, Any]:
        """The router's hook after each delivery (:class:`~squadron.shell.dispatch.Dispatcher`): a
        ``pull_request`` ``closed`` of a member's or a revert's pull request steps its set (the
        gate's echo of the App's own merge included). The summary says what it stepped."""
        pull, group = envelope.pull_request, envelope.merge_group
        dropped = (
            envelope.event == "merge_group"
            and envelope.action == "destroyed"
            and group is not None
            and group.reason == "dequeued"
            and group.pr_number is not None
        )
        closed = envelope.event == "pull_request" and envelope.action == "closed" and pull is not None
        if not (dropped or closed):
            return {}
        try:
            if dropped:
                assert group is not None and group.pr_number is not None
                stepped = self.on_dequeued(envelope.repository.full_name, group.pr_number)
            else:
                assert pull is not None
                stepped = self._nudged(envelope.repository.full_name, pull.head_ref)
        except ChangeSetRefusedError as exc:  # a step the set's rules refuse: the delivery is done
            logger.warning("change set not stepped after %s: %s", envelope.delivery_id, exc)
            return {"change_set": {"refused": str(exc)}}
        except ConflictError as exc:  # another router is at the step: it, or the next sweep, carries on
            logger.info("change set not stepped after %s: %s", envelope.delivery_id, exc)
            return {"change_set": {"deferred": str(exc)}}
        return {} if stepped is None else {"change_set": {"id": stepped.id, "state": str(stepped.state)}}

    def on_dequeued(self, repository: str, number: int) -> ChangeSet | None:
        """A ``merge_group`` ``destroyed`` (``dequeued``) webhook of pull request ``number`` of
        ``repository``: its merge group failed a required check, or a person took it out of the
        queue. When it is the member a merging set waits on, and GitHub shows it open and in no
        queue now, the set fails (its reverts and a person told follow): never queued again and
        again, never left ``merging``. The webhook is only a nudge; GitHub is read."""
        for listed in self.registry.change_sets(50):
            if listed.state is not SetState.MERGING or not _waits_on(listed, repository, number):
                continue
            for _ in range(MAX_STEPS):
                found = self.registry.get_change_set(listed.id)
                if found is None or not _waits_on(found, repository, number):
                    return None if found is None else self.step(found.id)
                github: MemberGitHub = self.github.client(found.installation_id, repository)
                if pull_outcome(github.get_pull(number), None).outcome != "open":
                    return self.step(found.id)  # merged or closed: the step reads which
                _, entry = github.merge_queue_entry(number)
                if entry is not None:
                    return found  # queued again (a sweep's merge, a person): its group decides
                failed = self._failed(found, repository, DROPPED)
                if self._save(found, failed):
                    return self.step(found.id)
            raise ConflictError(
                f"change set {listed.id} kept changing under this step: the next call carries on"
            )
        return None

    def _nudged(self, repository: str, head_ref: str) -> ChangeSet | None:
        """Only a nudge: a branch name is anyone's to choose, so the set acts only when
        ``repository`` is one of its members, and then on what GitHub says of the pull requests it
        recorded, never on the webhook's word."""
        set_id = set_of_branch(head_ref)
        if set_id is None:
            return None
        found = self.registry.get_change_set(set_id)
        if found is None or all(m.repository.lower() != repository.lower() for m in found.members):
            return None
        return self.step(set_id)

    def sweep(self, limit: int = 50) -> list[ChangeSet]:
        """Step every set that is merging, failed or reverting (the newest ``limit`` sets); a set
        GitHub fails for is logged and left to the next sweep."""
        stepped: list[ChangeSet] = []
        for change_set in self.registry.change_sets(limit):
            if change_set.state not in MOVING:
                continue
            try:
                after = self.step(change_set.id)
            except (GitHubError, ConflictError, ChangeSetRefusedError) as exc:
                logger.warning("change set %s not stepped: %s", change_set.id, exc)
                continue
            if after is not None:
                stepped.append(after)
        return stepped

    def sweep_record(self, body: str, message_id: str | None) -> dict[str, Any]:
        """A :data:`SWEEP_KIND` record on events.fifo: :meth:`sweep`, summarized (the record says
        nothing more: what is stepped is read from the registry, never from it)."""
        stepped = self.sweep()
        return {
            "kind": SWEEP_KIND,
            "duplicate": False,
            "change_sets": {found.id: str(found.state) for found in stepped},
        }

    # --- the driver ------------------------------------------------------------------------------

    def step(self, set_id: str) -> ChangeSet | None:
        """Take the stored set's steps until it waits; the set as stored then (None: no such set)."""
        for _ in range(MAX_STEPS):
            found = self.registry.get_change_set(set_id)
            if found is None:
                return None
            planned = self._next(found)
            if planned is None:
                return found
            self._save(found, planned)
        raise ConflictError(f"change set {set_id} kept changing under this step: the next call carries on")

    def _next(self, change_set: ChangeSet) -> ChangeSet | None:
        """The set after its next step is carried out on GitHub (None: it waits)."""
        step = next_step(change_set)
        if isinstance(step, Nothing):
            return None
        if isinstance(step, Merge):
            return self._merge(change_set, step)
        if isinstance(step, OpenReverts):
            reverts = self._open_reverts(change_set, step.repositories)
            self._tell(change_set, reverts)
            return sets.start_reverting(change_set, reverts, self.clock())
        if isinstance(step, AwaitReverts):
            return self._reverted(change_set, step.waiting)
        assert isinstance(step, Escalate)
        self._tell(change_set, {m.repository: m.revert_pr for m in change_set.members if m.revert_pr})
        return sets.escalate(change_set, self.clock())

    def _save(self, before: ChangeSet, after: ChangeSet) -> bool:
        """Store the step with its events; False when another router stored the set first."""
        events = events_of(before, after, correlation_id=f"{after.id}-merging")
        try:
            self.registry.save_change_set(before, after, events)
        except ConflictError:
            logger.info("change set %s: another step was stored first; read again", before.id)
            return False
        return True

    # --- merging ---------------------------------------------------------------------------------

    def _merge(self, change_set: ChangeSet, step: Merge) -> ChangeSet | None:
        installation, repo, number = change_set.installation_id, step.repository, step.pr_number
        github: MemberGitHub = self.github.client(installation, repo)
        pr = github.get_pull(number)
        now = self.clock()
        seen = pull_outcome(pr, step.head_sha)
        if seen.outcome == "merged":  # merged by an earlier attempt whose answer or record was lost
            return sets.record_merged(change_set, repo, seen.sha, now)
        if seen.outcome == "closed" or seen.reason:
            return self._failed(change_set, repo, seen.reason)
        decision = self.gate.judgement(installation, repo, pr)
        if decision.consent is None:
            return self._failed(change_set, repo, f"its gate no longer passes: {decision.result.description}")
        try:
            outcome = self.gate.merge_judged(installation, repo, pr, decision)
        except (RateLimitedError, GitHubUnavailableError, MaybeAppliedError):
            raise  # GitHub did not say: the next call reads the pull request first
        except GitHubError as exc:
            again = pull_outcome(github.get_pull(number), step.head_sha)
            if again.outcome == "merged":  # another router's merge of it, a moment before
                return sets.record_merged(change_set, repo, again.sha, self.clock())
            return self._failed(change_set, repo, refusal_reason(exc.status, exc.message))
        if outcome.merged:
            return sets.record_merged(change_set, repo, outcome.sha, self.clock())
        if outcome.queued:
            logger.info("change set %s: %s#%s is in its merge queue", change_set.id, repo, number)
            return None  # GitHub's queue merges it; its closed webhook steps the set on
        return self._failed(change_set, repo, outcome.detail)

    def _failed(self, change_set: ChangeSet, repository: str, reason: str) -> ChangeSet:
        logger.warning("change set %s: merging %s failed: %s", change_set.id, repository, reason)
        failed, _plan = sets.record_merge_failed(change_set, repository, reason, self.clock())
        return failed

    # --- reverting -------------------------------------------------------------------------------

    def _open_reverts(self, change_set: ChangeSet, repositories: Iterable[str]) -> dict[str, int]:
        """A revert pull request for each merged member, in the order given (newest merge first)."""
        return {change_set.member(name).repository: self._revert(change_set, name) for name in repositories}

    def _revert(self, change_set: ChangeSet, name: str) -> int:
        """The revert pull request of member ``name``'s merge, opened once: looked up by its branch
        (GitHub's ``revert-<number>-<ref>``, written by the App) first, and again when GitHub's
        answer is lost."""
        member = change_set.member(name)
        if member.pr_number is None:  # a merged member has its pull request
            raise ChangeSetRefusedError(f"{name} merged without a pull request in change set {change_set.id}")
        number = member.pr_number
        github: MemberGitHub = self.github.client(change_set.installation_id, member.repository)
        pr = github.get_pull(number)
        branch = revert_branch(number, str((pr.get("head") or {}).get("ref") or member.branch))
        key = revert_key(change_set.id, member.repository)

        def find() -> Json | None:
            return github.find_pull(branch, key, self.bot_login, change_set.created_at)

        def send() -> Json:
            return github.revert_pull(
                number,
                node_id=str(pr.get("node_id") or ""),
                title=f"Revert change set {change_set.id} in {member.repository} (#{number})",
                body=marked(revert_body(change_set, member.repository, number), key),
            )

        found = find()
        if found is None:
            try:
                found = once(send, find)
            except GraphQLError:  # refused: another router's revert may have made the branch a moment before
                found = find()
                if found is None:
                    raise
        logger.info("change set %s: the revert of %s#%s is #%s", change_set.id, name, number, found["number"])
        return int(found["number"])

    def _reverted(self, change_set: ChangeSet, waiting: Mapping[str, int]) -> ChangeSet | None:
        """The set with every revert pull request that merged recorded (None: none merged yet).
        One closed without merging (a person's say) escalates the set: the person is told first."""
        after = change_set
        closed: dict[str, int] = {}
        for repository, number in waiting.items():
            pr = self.github.client(change_set.installation_id, repository).get_pull(number)
            if pr.get("merged"):
                after = sets.record_reverted(after, repository, self.clock())
            elif pr.get("state") == "closed":
                closed[repository] = number
        if closed and after.state is SetState.REVERTING:
            told = after
            self._tell(
                told,
                {m.repository: m.revert_pr for m in told.members if m.revert_pr},
                key=reverts_closed_key(told.id),
                said=lambda mentions: reverts_closed_text(told, closed, mentions=mentions),
                needs_issue=False,
            )
            return sets.record_reverts_closed(told, tuple(closed), self.clock())
        return None if after is change_set else after

    # --- telling a person ------------------------------------------------------------------------

    def _tell(
        self,
        change_set: ChangeSet,
        reverts: Mapping[str, int],
        *,
        key: str | None = None,
        said: Callable[[tuple[str, ...]], str] | None = None,
        needs_issue: bool = True,
    ) -> None:
        """The one escalation on the origin issue (claimed under its key, then its comment looked
        up by the key and posted once) and the origin repository's needs-human path: its
        escalation label, assignees and needs-human issue. ``key`` and ``said`` (the mentions ->
        the words): another telling than the set's failure, with no needs-human issue of its own
        unless ``needs_issue`` (the failure's is open already)."""
        repo, installation, issue = change_set.origin_repository, change_set.installation_id, change_set.issue
        key = key or escalation_key(change_set.id)
        scope = f"change-set-{change_set.id}"
        held = self.registry.claim_write(scope, key, self.clock())
        if held is not None and held.result is not None:
            return  # told already
        if held is not None and self.clock() - held.claimed_at < TELLING:
            raise ConflictError(
                f"change set {change_set.id}: another router is telling a person; it carries on"
            )
        policy = self.policy_for(repo, installation)
        since = change_set.created_at - timedelta(minutes=5)
        if said is not None:
            text = said(policy.escalation_mentions)
        else:
            text = escalation_text(change_set, reverts, mentions=policy.escalation_mentions)
        if not self.github.find_comment(installation, repo, issue, key, since):
            self.github.comment(installation, repo, issue, text, "framework", key=key)
        labels = (policy.escalation_label,)
        self.github.add_labels(installation, repo, issue, labels)
        if policy.escalation_assignees:
            self.github.add_assignees(installation, repo, issue, policy.escalation_assignees)
        if policy.escalation_issue and needs_issue:
            issue_key = f"{key}-issue"
            if self.github.find_issue(installation, repo, issue_key, labels, since) is None:
                self.github.create_issue(
                    installation,
                    repo,
                    title=f"needs-human: change set {change_set.id} (#{issue})",
                    body=f"#{issue}'s change set was handed to humans.\n\n{text}",
                    labels=labels,
                    assignees=policy.escalation_assignees,
                    key=issue_key,
                )
        self.registry.record_write(scope, key, {"told": True})


#: Why a set fails when its member left the merge queue unmerged.
DROPPED = (
    "it was taken out of its merge queue unmerged (its merge group failed a required check, "
    "or a person removed it)"
)


def _waits_on(change_set: ChangeSet, repository: str, number: int) -> bool:
    """Whether ``change_set`` is merging and its next merge is pull request ``number`` of
    ``repository``."""
    step = next_step(change_set)
    return (
        isinstance(step, Merge) and step.repository.lower() == repository.lower() and step.pr_number == number
    )


class RecordQueue(Protocol):
    """events.fifo, for a record that is no event envelope (:class:`squadron.adapters.sqs.SqsEventQueue`)."""

    def send_record(self, body: str, *, group: str, deduplication: str) -> str: ...


def request_sweep(registry: ChangeSets, queue: RecordQueue, now: datetime, *, limit: int = 50) -> bool:
    """The reconciler's part (it only reads the registry): when one of the newest ``limit`` sets is
    merging, failed or reverting, put one :data:`SWEEP_KIND` record on events.fifo for the router
    (one per minute at most: its deduplication id names the minute). Whether it asked."""
    if not any(found.state in MOVING for found in registry.change_sets(limit)):
        return False
    minute = now.astimezone(UTC).strftime("%Y%m%dT%H%M")
    queue.send_record(
        json.dumps({"kind": SWEEP_KIND}), group=SWEEP_GROUP, deduplication=f"{SWEEP_KIND}-{minute}"
    )
    return True
