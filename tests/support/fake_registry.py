"""An in-memory Registry with the DynamoDB adapter's exact conditional semantics.

Unit and property tests route against it; the registry contract tests run the
same cases against this fake and against the DynamoDB adapter under moto, so
the two cannot drift apart.
"""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from squadron.domain.agents import (
    TERMINAL,
    AgentRecord,
    AgentStatus,
    ConflictError,
    InboxItem,
    IssueState,
    RegistryError,
    RoleKind,
    candidate_uid,
    parse_agent_id,
)
from squadron.domain.change_sets import MAX_OPEN_PER_INSTALLATION, ChangeSet
from squadron.domain.dashboard import GateView
from squadron.domain.domain_events import DomainEvent
from squadron.domain.effects import (
    AddBlocker,
    AgentWrite,
    Decision,
    DeliverInbox,
    LinkPullRequest,
    PutAgent,
    RecordReview,
    RemoveBlocker,
    Write,
    commit_agents,
)
from squadron.domain.history import MAX_HISTORY_EVENTS, check_period, history_order, utc_instant
from squadron.domain.issue_budget import LiveSpend
from squadron.domain.outbox import EXECUTION_LEASE, Claim, FailedEffect
from squadron.domain.pipelines.agent_stage import StageWait
from squadron.domain.pipelines.humans import HumanWait
from squadron.domain.pipelines.reactions import MAX_RUNS_PER_SUBJECT, RunRecord
from squadron.domain.retention import finished_at
from squadron.domain.routing import IssueView
from squadron.domain.writes import WriteClaim


class FakeRegistry:
    def __init__(self) -> None:
        self.agents: dict[str, AgentRecord] = {}
        self.issue_states: dict[tuple[int, int], IssueState] = {}
        self.issue_state_at: dict[tuple[int, int], datetime] = {}
        self.assignments: dict[tuple[int, int], tuple[bool, datetime]] = {}
        self.vouched: dict[tuple[int, int], tuple[str, datetime]] = {}
        #: (repo, issue, blocker) -> resolved?
        self.edges: dict[tuple[int, int, int], bool] = {}
        self.pr_links: dict[tuple[int, int], int] = {}
        self.branches: dict[tuple[int, str], int] = {}
        self.inbox: dict[str, dict[tuple[str, str], InboxItem]] = {}
        self.reviews: dict[tuple[int, int, str], RecordReview] = {}
        self.calls: Counter[str] = Counter()
        #: uid -> the agent that claimed it
        self.uids: dict[int, str] = {}
        #: (agent id, write key) -> its claim (the gateway's writes, each once).
        self.writes: dict[tuple[str, str], WriteClaim] = {}
        #: decision key -> the committed decision (done or not)
        self.decisions: dict[str, Decision] = {}
        #: event id -> the committed domain event, in commit order (what the stream carries)
        self.events: dict[str, DomainEvent] = {}
        #: (repo, PR) -> the merge gate's latest verdict
        self.verdicts: dict[tuple[int, int], str] = {}
        #: (repo, PR) -> what the gate said with its latest verdict (what it waits for)
        self.gate_descriptions: dict[tuple[int, int], str] = {}
        #: decision key -> its claim and progress (the adapter keeps them on the decision's item)
        self.runs: dict[str, dict[str, Any]] = {}
        #: decision key -> when it was last claimed (the adapter's open-index sort key)
        self.touched: dict[str, datetime] = {}
        #: (repo, number, entry) -> a pipeline's human stage waiting for people
        self.human_waits: dict[tuple[int, int, str], HumanWait] = {}
        #: effects refused for good, in the order recorded
        self.failed: list[FailedEffect] = []
        #: (repo, costed issue) -> agent id -> what its running task reported it has spent
        self.live: dict[tuple[int, int], dict[str, LiveSpend]] = {}
        #: (repo, issue or None) -> execution ARN -> the pipeline run recorded when it started
        self.pipeline_runs: dict[tuple[int, int | None], dict[str, RunRecord]] = {}
        #: change set id -> the set as stored (its latest version); installation -> sets open
        self.change_set_items: dict[str, ChangeSet] = {}
        self.open_sets: Counter[int] = Counter()
        #: agent id -> its pipeline stage's wait (the task token, its answer once kept)
        self.stage_waits: dict[str, StageWait] = {}

    # --- helpers ------------------------------------------------------------------------

    def snapshot_state(self) -> dict[str, object]:
        """Everything stored, for "replaying changes nothing" comparisons."""
        return copy.deepcopy(
            {
                "agents": self.agents,
                "issue_states": self.issue_states,
                "issue_state_at": self.issue_state_at,
                "assignments": self.assignments,
                "vouched": self.vouched,
                "edges": self.edges,
                "pr_links": self.pr_links,
                "branches": self.branches,
                "inbox": self.inbox,
                "reviews": self.reviews,
                "decisions": self.decisions,
                "events": self.events,
                "verdicts": self.verdicts,
                "stage_waits": self.stage_waits,
            }
        )

    def _check_agent(self, write: AgentWrite) -> None:
        current = self.agents.get(write.record.agent_id)
        if write.expected_version is None:
            if current is not None:
                raise ConflictError(f"agent {write.record.agent_id}", "already exists")
        elif current is None or current.version != write.expected_version:
            found = None if current is None else current.version
            raise ConflictError(
                f"agent {write.record.agent_id}", f"expected version {write.expected_version}, found {found}"
            )

    def _store_agent(self, write: AgentWrite) -> None:
        record = write.record
        self.agents[record.agent_id] = record
        if record.branch and record.issue_number is not None and record.kind is RoleKind.DEV:
            self.branches[(record.repo_id, record.branch)] = record.issue_number

    # --- reads --------------------------------------------------------------------------

    def issue_view(self, repo_id: int, number: int) -> IssueView:
        self.calls["issue_view"] += 1
        return IssueView(
            number=number,
            state=self.issue_states.get((repo_id, number)),
            state_at=self.issue_state_at.get((repo_id, number)),
            app_assigned=self.assignments[(repo_id, number)][0]
            if (repo_id, number) in self.assignments
            else None,
            assigned_at=self.assignments[(repo_id, number)][1]
            if (repo_id, number) in self.assignments
            else None,
            agents=tuple(
                sorted(
                    (a for a in self.agents.values() if a.repo_id == repo_id and a.issue_number == number),
                    key=lambda a: a.agent_id,
                )
            ),
            blockers=frozenset(
                b
                for (r, i, b), resolved in self.edges.items()
                if r == repo_id and i == number and not resolved
            ),
            blocks=frozenset(i for (r, i, b) in self.edges if r == repo_id and b == number),
            linked_issue=self.pr_links.get((repo_id, number)),
            vouched_by=self.vouched[(repo_id, number)][0] if (repo_id, number) in self.vouched else None,
            pull_requests=frozenset(
                pr for (r, pr), issue in self.pr_links.items() if r == repo_id and issue == number
            ),
            live=dict(self.live.get((repo_id, number), {})),
        )

    def record_live_spend(self, repo_id: int, issue: int, spend: LiveSpend) -> None:
        self.calls["record_live_spend"] += 1
        self.live.setdefault((repo_id, issue), {})[spend.agent_id] = spend

    def branch_links(self, repo_id: int, branches: Iterable[str]) -> dict[str, int]:
        self.calls["branch_links"] += 1
        return {b: self.branches[(repo_id, b)] for b in branches if (repo_id, b) in self.branches}

    def get_agent(self, agent_id: str) -> AgentRecord | None:
        self.calls["get_agent"] += 1
        return self.agents.get(agent_id)

    def pm_agent(self, repo_id: int) -> AgentRecord | None:
        self.calls["pm_agent"] += 1
        return next(
            (a for a in self.agents.values() if a.repo_id == repo_id and a.kind is RoleKind.PM),
            None,
        )

    def blocker_graph(self, repo_id: int, roots: Iterable[int], max_hops: int) -> dict[int, frozenset[int]]:
        self.calls["blocker_graph"] += 1
        live = [(i, b) for (r, i, b), resolved in self.edges.items() if r == repo_id and not resolved]
        graph: dict[int, set[int]] = {}
        seen = set(roots)
        frontier = deque((root, 0) for root in roots)
        while frontier:
            node, hops = frontier.popleft()
            if hops > max_hops:
                continue
            for issue, blocker in live:
                if node in (issue, blocker):
                    graph.setdefault(issue, set()).add(blocker)
                    for nxt in (issue, blocker):
                        if nxt not in seen:
                            seen.add(nxt)
                            frontier.append((nxt, hops + 1))
        return {issue: frozenset(blockers) for issue, blockers in graph.items()}

    # --- writes -------------------------------------------------------------------------

    def put_agent(self, write: AgentWrite) -> None:
        self.calls["put_agent"] += 1
        self._check_agent(write)
        self._store_agent(write)

    def set_issue_state(self, repo_id: int, number: int, state: IssueState, at: datetime) -> None:
        self.calls["set_issue_state"] += 1
        stored = self.issue_state_at.get((repo_id, number))
        if stored is not None and stored > at:
            return
        self.issue_states[(repo_id, number)] = state
        self.issue_state_at[(repo_id, number)] = at

    def vouch_issue(self, repo_id: int, number: int, by: str, at: datetime) -> None:
        self.calls["vouch_issue"] += 1
        stored = self.vouched.get((repo_id, number))
        if stored is not None and stored[1] > at:
            return
        self.vouched[(repo_id, number)] = (by, at)

    def set_issue_assignment(self, repo_id: int, number: int, assigned: bool, at: datetime) -> None:
        self.calls["set_issue_assignment"] += 1
        stored = self.assignments.get((repo_id, number))
        if stored is not None and stored[1] > at:
            return
        self.assignments[(repo_id, number)] = (assigned, at)

    def add_blocker(
        self, repo_id: int, issue: int, blocker: int, agent: AgentWrite | None, at: datetime
    ) -> None:
        self.calls["add_blocker"] += 1
        if self.issue_states.get((repo_id, blocker)) is IssueState.CLOSED:
            raise ConflictError(f"blocker #{blocker}", "it is closed")
        if agent is not None:
            self._check_agent(agent)
            self._store_agent(agent)
        self.edges[(repo_id, issue, blocker)] = False

    def remove_blocker(
        self, repo_id: int, issue: int, blocker: int, agent: AgentWrite | None, at: datetime
    ) -> None:
        self.calls["remove_blocker"] += 1
        if agent is not None:
            self._check_agent(agent)
            self._store_agent(agent)
        if (repo_id, issue, blocker) in self.edges:
            self.edges[(repo_id, issue, blocker)] = True

    def link_pull_request(
        self, repo_id: int, pr_number: int, issue_number: int, agent: AgentWrite | None, at: datetime
    ) -> None:
        self.calls["link_pull_request"] += 1
        if agent is not None:
            self._check_agent(agent)
            self._store_agent(agent)
        self.pr_links[(repo_id, pr_number)] = issue_number

    # --- change sets (docs/change-sets.md) ------------------------------------------------------

    def _check_events(self, events: Sequence[DomainEvent]) -> None:
        for event in events:
            if event.id in self.events:
                raise ConflictError(f"event {event.id}", "already stored")

    def create_change_set(self, change_set: ChangeSet, events: Sequence[DomainEvent]) -> None:
        self.calls["create_change_set"] += 1
        if change_set.id in self.change_set_items:
            raise ConflictError(f"change set {change_set.id}", "already exists")
        counted = not change_set.over
        if counted and self.open_sets[change_set.installation_id] >= MAX_OPEN_PER_INSTALLATION:
            raise ConflictError(
                f"installation {change_set.installation_id}",
                f"{MAX_OPEN_PER_INSTALLATION} change sets are open",
            )
        self._check_events(events)
        self.change_set_items[change_set.id] = change_set
        self.open_sets[change_set.installation_id] += counted
        self.events.update((event.id, event) for event in events)

    def save_change_set(self, before: ChangeSet, after: ChangeSet, events: Sequence[DomainEvent]) -> None:
        self.calls["save_change_set"] += 1
        if after.id != before.id or after.version <= before.version:
            raise ValueError(f"{after.id} v{after.version} is not a step of {before.id} v{before.version}")
        stored = self.change_set_items.get(after.id)
        if stored is None or stored.version != before.version:
            raise ConflictError(f"change set {after.id}", f"expected version {before.version}")
        self._check_events(events)
        self.change_set_items[after.id] = after
        if after.over and not before.over:
            self.open_sets[after.installation_id] -= 1
        self.events.update((event.id, event) for event in events)

    def get_change_set(self, set_id: str) -> ChangeSet | None:
        return self.change_set_items.get(set_id)

    def change_sets(self, limit: int = 50) -> list[ChangeSet]:
        newest = sorted(self.change_set_items.values(), key=lambda c: (c.created_at, c.id), reverse=True)
        return newest[:limit]

    def open_change_sets(self, installation_id: int) -> int:
        return self.open_sets[installation_id]

    # --- decisions ---------------------------------------------------------------------------

    def commit(self, writes: Sequence[Write], decision: Decision, events: Sequence[DomainEvent] = ()) -> None:
        """All or nothing, as the adapter's TransactWriteItems: every condition first, then the writes."""
        self.calls["commit"] += 1
        if decision.key in self.decisions:
            raise ConflictError(f"decision {decision.key}", "already committed")
        for event in events:
            if event.id in self.events:
                raise ConflictError(f"event {event.id}", "exists")
        agents = commit_agents(writes)
        for write in agents:
            self._check_agent(write)
        for effect in writes:
            if (
                isinstance(effect, AddBlocker)
                and self.issue_states.get((effect.repo_id, effect.blocker)) is IssueState.CLOSED
            ):
                raise ConflictError(f"blocker #{effect.blocker}", "it is closed")
        for write in agents:
            self._store_agent(write)
        for effect in writes:
            match effect:
                case AddBlocker(repo_id=repo_id, issue=issue, blocker=blocker):
                    self.edges[(repo_id, issue, blocker)] = False
                case RemoveBlocker(repo_id=repo_id, issue=issue, blocker=blocker):
                    if (repo_id, issue, blocker) in self.edges:
                        self.edges[(repo_id, issue, blocker)] = True
                case LinkPullRequest(repo_id=repo_id, pr_number=pr, issue_number=issue):
                    self.pr_links[(repo_id, pr)] = issue
                case DeliverInbox(item=item):
                    parse_agent_id(item.agent_id)
                    self.inbox.setdefault(item.agent_id, {})[(item.delivery_id, item.kind)] = item
                case PutAgent():
                    pass
        self.decisions[decision.key] = decision
        self.events.update((event.id, event) for event in events)

    def gate_verdict(self, repo_id: int, pr_number: int) -> str | None:
        self.calls["gate_verdict"] += 1
        return self.verdicts.get((repo_id, pr_number))

    def gate_state(self, repo_id: int, pr_number: int) -> tuple[str | None, str]:
        self.calls["gate_state"] += 1
        return self.verdicts.get((repo_id, pr_number)), self.gate_descriptions.get((repo_id, pr_number), "")

    def gate_views(self, repo_id: int, pr_numbers: Iterable[int]) -> dict[int, GateView]:
        self.calls["gate_views"] += 1
        return {
            n: GateView(verdict, self.gate_descriptions.get((repo_id, n), ""))
            for n in pr_numbers
            if (verdict := self.verdicts.get((repo_id, n))) is not None
        }

    def set_gate_description(self, repo_id: int, pr_number: int, verdict: str, description: str) -> bool:
        self.calls["set_gate_description"] += 1
        if self.verdicts.get((repo_id, pr_number)) != verdict:
            return False
        self.gate_descriptions[(repo_id, pr_number)] = description[:140]
        return True

    def change_verdict(self, repo_id: int, pr_number: int, previous: str | None, event: DomainEvent) -> bool:
        self.calls["change_verdict"] += 1
        if self.verdicts.get((repo_id, pr_number)) != previous or event.id in self.events:
            return False
        self.verdicts[(repo_id, pr_number)] = str(event.data["verdict"])
        self.gate_descriptions[(repo_id, pr_number)] = str(event.data.get("description") or "")[:140]
        self.events[event.id] = event
        return True

    def decision(self, key: str) -> Decision | None:
        self.calls["decision"] += 1
        return self.decisions.get(key)

    def finish_decision(self, key: str, at: datetime) -> None:
        self.calls["finish_decision"] += 1
        found = self.decisions.get(key)
        if found is None:
            raise ConflictError(f"decision {key}", "does not exist")
        self.decisions[key] = dataclasses.replace(found, outside=(), done=True)

    def unfinished_decisions(self, decided_before: datetime, limit: int = 100) -> list[Decision]:
        def touched(d: Decision) -> datetime:
            return self.touched.get(d.key, d.decided_at)

        found = [d for d in self.decisions.values() if not d.done and touched(d) < decided_before]
        return sorted(found, key=lambda d: (touched(d), d.key))[:limit]

    # --- the outbox's claim and progress (as adapters/registry/outbox.py) ---------------------

    def claim_decision(self, key: str, owner: str, now: datetime) -> Claim | None:
        self.calls["claim_decision"] += 1
        found = self.decisions.get(key)
        if found is None or found.done:
            return None
        run = self.runs.setdefault(key, {"attempts": 0, "settled": set(), "last_error": ""})
        holder, until = run.get("runner"), run.get("until")
        # Whole seconds, as the adapter stores the expiry.
        if (
            holder not in (None, owner)
            and until is not None
            and int(until.timestamp()) > int(now.timestamp())
        ):
            return None
        run.update(runner=owner, until=now + EXECUTION_LEASE, attempts=run["attempts"] + 1)
        self.touched[key] = now
        return Claim(owner, run["attempts"], frozenset(run["settled"]), run["last_error"])

    def settle_effect(self, key: str, owner: str, index: int) -> bool:
        run = self.runs.get(key)
        if run is None or run.get("runner") != owner:
            return False
        run["settled"].add(index)
        return True

    def fail_effect(self, key: str, owner: str, failed: FailedEffect) -> bool:
        if not self.settle_effect(key, owner, failed.index):
            return False
        self.failed.append(failed)
        return True

    def release_decision(self, key: str, owner: str, error: str) -> None:
        run = self.runs.get(key)
        if run is not None and run.get("runner") == owner:
            run.update(runner=None, until=None, last_error=error[:300])

    def failed_effects(self, repo_id: int, limit: int = 20) -> list[FailedEffect]:
        mine = [f for f in self.failed if f.repo_id == repo_id]
        return sorted(mine, key=lambda f: (f.at, f.decision, f.index), reverse=True)[:limit]

    def history(
        self, repo_id: int, start: datetime, end: datetime, limit: int = MAX_HISTORY_EVENTS
    ) -> list[DomainEvent]:
        """The adapter's history index: the repository's events of [start, end) by (time, id)."""
        self.calls["history"] += 1
        check_period(start, end)
        if limit < 1:
            raise ValueError(f"history limit must be at least 1, got {limit}")
        lo, hi = utc_instant(start), utc_instant(end)
        found = [
            e for e in self.events.values() if e.repository.id == repo_id and lo <= utc_instant(e.time) < hi
        ]
        return sorted(found, key=history_order)[:limit]

    def record_event(self, event: DomainEvent) -> bool:
        self.calls["record_event"] += 1
        if event.id in self.events:
            return False
        self.events[event.id] = event
        return True

    def deliver(self, item: InboxItem) -> None:
        self.calls["deliver"] += 1
        parse_agent_id(item.agent_id)
        self.inbox.setdefault(item.agent_id, {}).setdefault((item.delivery_id, item.kind), item)

    def record_review(self, review: RecordReview, at: datetime) -> None:
        self.calls["record_review"] += 1
        key = (review.repo_id, review.pr_number, review.reviewer)
        stored = self.reviews.get(key)
        if stored is None or stored.review_id <= review.review_id:
            self.reviews[key] = review

    def confirm_launch(self, agent_id: str, token: str, task_arn: str, at: datetime) -> None:
        self.calls["confirm_launch"] += 1
        agent = self.agents.get(agent_id)
        if agent is None or agent.pending_launch != token:
            return
        self.agents[agent_id] = agent.model_copy(
            update={
                "pending_launch": None,
                "task_arn": task_arn,
                "version": agent.version + 1,
                "updated_at": at,
                "launch_failures": 0,
                "launch_error": None,
                "launch_failed_at": None,
            }
        )

    def hold_launch(self, agent_id: str, token: str, error: str, at: datetime) -> bool:
        self.calls["hold_launch"] += 1
        agent = self.agents.get(agent_id)
        if agent is None or agent.pending_launch != token:
            return False
        self.agents[agent_id] = agent.model_copy(
            update={
                "launch_failures": agent.launch_failures + 1,
                "launch_error": error[:500],
                "launch_failed_at": at,
                "version": agent.version + 1,
                "updated_at": at,
            }
        )
        return True

    def arm_launch(
        self,
        agent_id: str,
        token: str,
        secret_hash: str,
        expires_at: datetime,
        at: datetime,
        *,
        replacing: str | None = None,
    ) -> bool:
        self.calls["arm_launch"] += 1
        agent = self.agents.get(agent_id)
        if agent is None or agent.pending_launch != token or agent.launch_secret_hash != replacing:
            return False
        self.agents[agent_id] = agent.model_copy(
            update={
                "launch_secret_hash": secret_hash,
                "launch_secret_expires_at": expires_at,
                "version": agent.version + 1,
                "updated_at": at,
            }
        )
        return True

    # --- pipeline runs of an issue (PipelineRunIndex) ------------------------------------------

    def record_run(self, run: RunRecord) -> None:
        self.calls["record_run"] += 1
        self.pipeline_runs.setdefault((run.repo_id, run.number), {})[run.execution_arn] = run

    def runs_of(self, repo_id: int, number: int | None) -> list[RunRecord]:
        self.calls["runs_of"] += 1
        runs = sorted(
            self.pipeline_runs.get((repo_id, number), {}).values(),
            key=lambda run: (run.started_at, run.execution_arn),
            reverse=True,
        )
        return runs[:MAX_RUNS_PER_SUBJECT]

    def forget_run(self, run: RunRecord) -> bool:
        self.calls["forget_run"] += 1
        runs = self.pipeline_runs.get((run.repo_id, run.number), {})
        held = runs.get(run.execution_arn)
        if held is None or held.started_at != run.started_at:
            return False
        del runs[run.execution_arn]
        return True

    def claim_write(self, agent_id: str, key: str, now: datetime) -> WriteClaim | None:
        self.calls["claim_write"] += 1
        held = self.writes.get((agent_id, key))
        if held is not None:
            return held
        self.writes[(agent_id, key)] = WriteClaim(claimed_at=now)
        return None

    def record_write(self, agent_id: str, key: str, result: Any) -> None:
        self.calls["record_write"] += 1
        held = self.writes[(agent_id, key)]
        self.writes[(agent_id, key)] = WriteClaim(claimed_at=held.claimed_at, result=result)

    # --- pipelines' human stages waiting for people (the HumanWaits port) ---------------------

    def open_wait(self, wait: HumanWait) -> HumanWait:
        self.calls["open_wait"] += 1
        fresh = wait.model_copy(update={"counted": (), "answer": None, "sent": False, "gone": False})
        return self.human_waits.setdefault((wait.repo_id, wait.number, wait.entry), fresh)

    def open_waits(self, repo_id: int, number: int) -> list[HumanWait]:
        self.calls["open_waits"] += 1
        found = [
            wait
            for (repo, n, _), wait in self.human_waits.items()
            if (repo, n) == (repo_id, number) and not wait.sent
        ]
        return sorted(found, key=lambda wait: (wait.opened_at, wait.entry))

    def count_toward(self, repo_id: int, number: int, entry: str, login: str) -> HumanWait | None:
        self.calls["count_toward"] += 1
        held = self.human_waits.get((repo_id, number, entry))
        if held is None:
            return None
        who = (
            held.counted if login in held.counted else tuple(sorted({*held.counted, login}, key=str.casefold))
        )
        self.human_waits[(repo_id, number, entry)] = held = held.model_copy(update={"counted": who})
        return held

    def keep_answer(self, repo_id: int, number: int, entry: str, answer: dict[str, Any]) -> HumanWait:
        self.calls["keep_answer"] += 1
        held = self.human_waits.get((repo_id, number, entry))
        if held is None:
            raise ConflictError(f"human wait {entry} of #{number}", "does not exist")
        if held.answer is None:
            held = held.model_copy(update={"answer": copy.deepcopy(answer)})
            self.human_waits[(repo_id, number, entry)] = held
        return held

    def close_wait(self, repo_id: int, number: int, entry: str) -> None:
        self.calls["close_wait"] += 1
        held = self.human_waits.get((repo_id, number, entry))
        if held is not None:
            self.human_waits[(repo_id, number, entry)] = held.model_copy(update={"sent": True})

    def mark_gone(self, repo_id: int, number: int, entry: str) -> None:
        self.calls["mark_gone"] += 1
        held = self.human_waits.get((repo_id, number, entry))
        if held is not None:
            self.human_waits[(repo_id, number, entry)] = held.model_copy(update={"gone": True})

    def hold_stage_wait(self, wait: StageWait, *, replacing: str | None = None) -> StageWait:
        self.calls["hold_stage_wait"] += 1
        held = self.stage_waits.get(wait.agent_id)
        if held is None or held.sent or (replacing is not None and held.entry == replacing):
            self.stage_waits[wait.agent_id] = wait.model_copy(update={"answer": None, "sent": False})
            return self.stage_waits[wait.agent_id]
        return held

    def stage_wait(self, agent_id: str) -> StageWait | None:
        self.calls["stage_wait"] += 1
        return self.stage_waits.get(agent_id)

    def answer_stage_wait(self, agent_id: str, entry: str, answer: dict[str, Any]) -> StageWait | None:
        self.calls["answer_stage_wait"] += 1
        held = self.stage_waits.get(agent_id)
        if held is None or held.entry != entry:
            return None
        if held.answer is None:
            held = held.model_copy(update={"answer": copy.deepcopy(answer)})
            self.stage_waits[agent_id] = held
        return held

    def mark_stage_wait_sent(self, agent_id: str, entry: str) -> None:
        self.calls["mark_stage_wait_sent"] += 1
        held = self.stage_waits.get(agent_id)
        if held is not None and held.entry == entry:
            self.stage_waits[agent_id] = held.model_copy(update={"sent": True})

    def claim_uid(self, agent_id: str, at: datetime) -> int:
        agent = self.agents.get(agent_id)
        if agent is None:
            raise ConflictError(f"agent {agent_id}", "does not exist")
        if agent.uid is not None:
            return agent.uid
        for attempt in range(16):
            uid = candidate_uid(agent_id, attempt)
            if self.uids.setdefault(uid, agent_id) != agent_id:
                continue
            self.agents[agent_id] = agent.model_copy(
                update={"uid": uid, "version": agent.version + 1, "updated_at": at}
            )
            return uid
        raise RegistryError(f"no free uid for {agent_id}")

    # --- reads beyond the router's (agent host, reconciler) ------------------------------

    def pending_inbox(self, agent_id: str) -> list[InboxItem]:
        items = self.inbox.get(agent_id, {}).values()
        return sorted(items, key=lambda i: (i.received_at.isoformat(), i.delivery_id, i.kind))

    def ack_inbox(self, agent_id: str, items: list[InboxItem]) -> None:
        box = self.inbox.get(agent_id, {})
        for item in items:
            box.pop((item.delivery_id, item.kind), None)

    def reviews_of(self, repo_id: int, pr_number: int) -> dict[str, RecordReview]:
        return {r: review for (rr, pr, r), review in self.reviews.items() if (rr, pr) == (repo_id, pr_number)}

    def agents_with_status(self, status: AgentStatus) -> list[AgentRecord]:
        found = [a for a in self.agents.values() if a.status is status]
        if status in TERMINAL:  # by their finish; purged ones last (the adapter's sort key)
            return sorted(
                found, key=lambda a: (a.purged_at is not None, finished_at(a) or a.updated_at, a.agent_id)
            )
        return sorted(found, key=lambda a: (a.updated_at.isoformat(), a.agent_id))

    def recently_finished(self, limit: int) -> list[AgentRecord]:
        found = []
        for status in sorted(TERMINAL):
            theirs = [a for a in self.agents_with_status(status) if a.purged_at is None]
            found += theirs[-limit:] if limit > 0 else []
        return sorted(found, key=lambda a: (finished_at(a) or a.updated_at, a.agent_id), reverse=True)

    def finished_agents(self, before: datetime, limit: int) -> list[AgentRecord]:
        found = [
            (finished, a.agent_id, a)
            for a in self.agents.values()
            if a.purged_at is None and (finished := finished_at(a)) is not None and finished < before
        ]
        return [a for _, _, a in sorted(found, key=lambda t: (t[0], t[1]))[:limit]]

    # --- leases ---------------------------------------------------------------------------

    def acquire_lease(self, agent_id: str, owner: str, now: datetime, ttl: timedelta) -> AgentRecord:
        self.calls["acquire_lease"] += 1
        agent = self.agents.get(agent_id)
        if agent is None:
            raise ConflictError(f"lease of {agent_id}", "held by another live task")
        held = agent.lease_owner not in (None, owner) and agent.lease_expires_at is not None
        if held and agent.lease_expires_at is not None and agent.lease_expires_at >= now:
            raise ConflictError(f"lease of {agent_id}", "held by another live task")
        leased = agent.model_copy(
            update={
                "lease_owner": owner,
                "lease_expires_at": now + ttl,
                "heartbeat_at": now,
                "version": agent.version + 1,
                "updated_at": now,
            }
        )
        self.agents[agent_id] = leased
        return leased

    def release_lease(self, agent_id: str, owner: str, now: datetime) -> None:
        self.calls["release_lease"] += 1
        agent = self.agents.get(agent_id)
        if agent is None or agent.lease_owner != owner:
            return
        self.agents[agent_id] = agent.model_copy(
            update={
                "lease_owner": None,
                "lease_expires_at": None,
                "version": agent.version + 1,
                "updated_at": now,
            }
        )


class FakeLauncher:
    """Records launches; a (token, secret) seen before returns the same task (like ECS clientToken),
    and :meth:`find` answers a launch's task that was not stopped (like ListTasks by startedBy).

    ``launched`` is keyed by launch token (the latest task of each launch); ``secrets`` keeps the
    secret each launch's latest task was given, as a task would find it in its environment.
    """

    def __init__(self) -> None:
        self.launched: dict[str, tuple[str, str, str]] = {}
        self.secrets: dict[str, str] = {}
        self.stopped: list[tuple[str, str]] = []
        self.fail_next = 0
        self._tasks: dict[tuple[str, str], str] = {}

    def launch(self, agent_id: str, purpose: str, token: str, secret: str) -> str:
        if self.fail_next:
            self.fail_next -= 1
            raise RuntimeError("RunTask failed (injected)")
        key = (token, secret)
        if key not in self._tasks:
            self._tasks[key] = f"arn:aws:ecs:us-east-1:123456789012:task/squadron/{len(self._tasks) + 1}"
            self.launched[token] = (agent_id, purpose, self._tasks[key])
            self.secrets[token] = secret
        return self._tasks[key]

    def find(self, token: str) -> str | None:
        """The latest task of launch ``token`` unless it was stopped (as ListTasks by startedBy)."""
        latest = self.launched.get(token)
        stopped = {arn for arn, _ in self.stopped}
        return latest[2] if latest is not None and latest[2] not in stopped else None

    def stop(self, task_arn: str, reason: str) -> None:
        self.stopped.append((task_arn, reason))

    def tasks_for(self, agent_id: str) -> list[str]:
        return [arn for (agent, _, arn) in self.launched.values() if agent == agent_id]


class FakeRouterGitHub:
    def __init__(self, permissions: dict[str, str] | None = None) -> None:
        self.permissions = permissions or {}
        self.comments: list[tuple[str, int, str, str]] = []
        self.closed: list[tuple[str, int, str]] = []
        self.labelled: list[tuple[str, int, tuple[str, ...]]] = []
        self.unlabelled: list[tuple[str, int, str]] = []
        self.assigned: list[tuple[str, int, tuple[str, ...]]] = []
        self.created: list[dict[str, object]] = []
        self.permission_calls = 0
        #: Every login whose permission was asked, in order.
        self.asked: list[str] = []
        #: The idempotency key each comment (by index in ``comments``) and issue was created with.
        self.comment_keys: list[str | None] = []
        self.issue_keys: list[str | None] = []
        #: Lookups by key a retry made (what a resumed decision asked before creating again).
        self.lookups: list[str] = []
        #: What issue_state answers per number (anything else: unknown).
        self.states: dict[int, str] = {}

    def permission(self, installation_id: int | None, repo_full_name: str, login: str) -> str:
        """The login's role (as the permission endpoint's ``role_name``); anyone else reads."""
        self.permission_calls += 1
        self.asked.append(login)
        return self.permissions.get(login, "read")

    def comment(
        self,
        installation_id: int | None,
        repo_full_name: str,
        number: int,
        body: str,
        author: str,
        *,
        key: str | None = None,
    ) -> None:
        self.comments.append((repo_full_name, number, body, author))
        self.comment_keys.append(key)

    def close_issue(self, installation_id: int | None, repo_full_name: str, number: int, reason: str) -> None:
        self.closed.append((repo_full_name, number, reason))

    def add_labels(
        self, installation_id: int | None, repo_full_name: str, number: int, labels: tuple[str, ...]
    ) -> None:
        self.labelled.append((repo_full_name, number, labels))

    def remove_label(self, installation_id: int | None, repo_full_name: str, number: int, label: str) -> None:
        self.unlabelled.append((repo_full_name, number, label))

    def add_assignees(
        self, installation_id: int | None, repo_full_name: str, number: int, logins: tuple[str, ...]
    ) -> None:
        self.assigned.append((repo_full_name, number, logins))

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
    ) -> int:
        self.created.append(
            {"repo": repo_full_name, "title": title, "body": body, "labels": labels, "assignees": assignees}
        )
        self.issue_keys.append(key)
        return 900 + len(self.created)

    def find_comment(
        self, installation_id: int | None, repo_full_name: str, number: int, key: str, since: datetime
    ) -> bool:
        self.lookups.append(key)
        return any(
            k == key and (repo, n) == (repo_full_name, number)
            for (repo, n, _, _), k in zip(self.comments, self.comment_keys, strict=True)
        )

    def find_issue(
        self,
        installation_id: int | None,
        repo_full_name: str,
        key: str,
        labels: tuple[str, ...],
        since: datetime,
    ) -> int | None:
        self.lookups.append(key)
        for index, (issue, k) in enumerate(zip(self.created, self.issue_keys, strict=True)):
            if k == key and issue["repo"] == repo_full_name:
                return 901 + index
        return None

    def issue_state(self, installation_id: int | None, repo_full_name: str, number: int) -> str:
        return self.states.get(number, "unknown")
