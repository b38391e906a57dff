"""Change sets' pure core (squadron.domain.change_sets): proposals and their refusals, cycles
named, the merge order, the one combined check, the failure plan, approvals, and the lifecycle's
events against their checked-in schemas. Tables of cases."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jsonschema
import pytest

from squadron.domain import change_sets as cs
from squadron.domain.change_set_events import events_of
from squadron.domain.change_sets import ChangeSet, ChangeSetRefusedError, SetState
from squadron.domain.domain_events import DomainEvent

T0 = datetime(2026, 11, 28, 5, 0, tzinfo=UTC)
SCHEMAS = Path(__file__).resolve().parents[2] / "schemas" / "events"
INSTALLED = {"octo/schema": 11, "octo/server": 12, "octo/client": 13, "octo/docs": 14, "octo/app": 1}
SET_ID = cs.change_set_id(77, 11, 5, "delivery-1")


def proposed(
    repositories: Sequence[str] = ("octo/server", "octo/client"),
    dependencies: Sequence[tuple[str, str]] = (
        ("octo/server", "octo/schema"),
        ("octo/client", "octo/server"),
    ),
    *,
    origin: str = "octo/schema",
    installed: dict[str, int] | None = None,
    open_sets: int = 0,
) -> ChangeSet:
    return cs.propose(
        set_id=SET_ID,
        installation_id=77,
        origin=origin,
        issue=5,
        repositories=repositories,
        dependencies=dependencies,
        installation_repositories=INSTALLED if installed is None else installed,
        proposed_by="11-pm",
        open_sets=open_sets,
        at=T0,
    )


def writers(change_set: ChangeSet, permission: str = "write") -> dict[str, str | None]:
    return {m.repository: permission for m in change_set.members}


def approved(change_set: ChangeSet | None = None) -> ChangeSet:
    found = change_set or proposed()
    after, _ = cs.approve(found, "octocat", writers(found), T0)
    return after


def ready(change_set: ChangeSet | None = None) -> ChangeSet:
    found = cs.start_work(approved(change_set), T0)
    for number, member in enumerate(found.members, start=1):
        found = cs.record_pull_request(found, member.repository, number, T0)
        found = cs.record_gate(found, member.repository, "ready", T0)
    assert found.state is SetState.READY
    return found


def merging(change_set: ChangeSet | None = None) -> ChangeSet:
    return cs.begin_merging(ready(change_set), T0)


# --- proposals ---------------------------------------------------------------------------------


def test_a_proposal_holds_the_origin_first_each_on_the_sets_branch() -> None:
    found = proposed()
    assert [m.repository for m in found.members] == ["octo/schema", "octo/server", "octo/client"]
    assert {m.branch for m in found.members} == {f"change-set/{SET_ID}"}
    assert [m.repo_id for m in found.members] == [11, 12, 13]
    assert found.state is SetState.PROPOSED and found.version == 1
    assert found.waiting_for_approval() == ("octo/schema", "octo/server", "octo/client")


def test_the_same_proposal_names_the_same_set_and_another_one_another() -> None:
    assert cs.change_set_id(77, 11, 5, "delivery-1") == SET_ID
    assert cs.change_set_id(77, 11, 5, "delivery-2") != SET_ID
    assert cs.change_set_id(78, 11, 5, "delivery-1") != SET_ID


@pytest.mark.parametrize(
    ("repositories", "dependencies", "extra", "refused"),
    [
        (("other/repo",), (), {}, "other/repo is not a repository of installation 77"),
        (("octo/server", "octo/server"), (), {}, "octo/server is named twice"),
        (("octo/server", "OCTO/Server"), (), {}, "OCTO/Server is named twice"),
        (("not a name",), (), {}, "'not a name' is not a repository name"),
        ((), (), {}, "at least two repositories"),
        (("octo/server",), (("octo/server", "octo/server"),), {}, "octo/server cannot depend on itself"),
        (
            ("octo/server",),
            (("octo/server", "octo/client"),),
            {},
            "names octo/client, which is not in the set",
        ),
        (
            ("octo/server", "octo/client"),
            (("octo/schema", "octo/client"), ("octo/client", "octo/server"), ("octo/server", "octo/schema")),
            {},
            "cycle: octo/schema -> octo/client -> octo/server -> octo/schema",
        ),
        (("octo/server",), (), {"open_sets": cs.MAX_OPEN_PER_INSTALLATION}, "has 20 change sets open"),
        (
            ("octo/server",),
            (),
            {"origin": "octo/elsewhere"},
            "octo/elsewhere is not a repository of installation",
        ),
    ],
)
def test_a_proposal_is_refused_with_its_reason(
    repositories: tuple[str, ...],
    dependencies: tuple[tuple[str, str], ...],
    extra: dict[str, object],
    refused: str,
) -> None:
    with pytest.raises(ChangeSetRefusedError, match=refused.replace("(", r"\(").replace(")", r"\)")):
        proposed(repositories, dependencies, **extra)  # type: ignore[arg-type]


def test_more_repositories_than_the_bound_are_refused_and_the_bound_itself_is_not() -> None:
    many = {f"octo/r{i}": 100 + i for i in range(cs.MAX_REPOSITORIES + 1)}
    names = sorted(many)
    at_bound = proposed(names[1 : cs.MAX_REPOSITORIES], (), origin=names[0], installed=many)
    assert len(at_bound.members) == cs.MAX_REPOSITORIES
    with pytest.raises(ChangeSetRefusedError, match="at most 10"):
        proposed(names[1:], (), origin=names[0], installed=many)


def test_the_origin_named_again_among_the_others_is_one_member() -> None:
    found = proposed(("octo/server", "octo/schema"), ())
    assert [m.repository for m in found.members] == ["octo/schema", "octo/server"]


# --- cycles and order --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "edges", "cycle"),
    [
        ("abc", [], None),
        ("abc", [("a", "b"), ("b", "c")], None),
        ("abc", [("a", "b"), ("b", "a")], ("a", "b", "a")),
        ("abc", [("a", "b"), ("b", "c"), ("c", "a")], ("a", "b", "c", "a")),
        ("abcd", [("a", "b"), ("c", "d"), ("d", "c")], ("c", "d", "c")),
        ("abcd", [("a", "b"), ("a", "c"), ("c", "d"), ("d", "a")], ("a", "c", "d", "a")),
        ("ab", [("a", "a")], ("a", "a")),
    ],
)
def test_a_cycle_is_found_and_named(
    nodes: str, edges: list[tuple[str, str]], cycle: tuple[str, ...] | None
) -> None:
    assert cs.find_cycle(list(nodes), edges) == cycle


@pytest.mark.parametrize(
    ("nodes", "edges", "order"),
    [
        ("abc", [], "abc"),  # no dependency: the set's own order
        ("abc", [("a", "b"), ("b", "c")], "cba"),
        ("abc", [("a", "c")], "bca"),  # c before a; b keeps its place among the free
        ("abcd", [("a", "d"), ("b", "d")], "cdab"),
        ("abcd", [("d", "a"), ("c", "a")], "abcd"),
        ("abcde", [("a", "e"), ("b", "e"), ("e", "c")], "cdeab"),
    ],
)
def test_the_merge_order_is_topological_and_stable(
    nodes: str, edges: list[tuple[str, str]], order: str
) -> None:
    assert "".join(cs.topological(list(nodes), edges)) == order


def test_the_sets_merge_order_puts_what_others_need_first() -> None:
    assert cs.merge_order(proposed()) == ("octo/schema", "octo/server", "octo/client")
    inverted = proposed(dependencies=(("octo/schema", "octo/client"),))
    assert cs.merge_order(inverted) == ("octo/server", "octo/client", "octo/schema")


# --- approval ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("permissions", "approved_now", "state"),
    [
        ({"octo/schema": "write", "octo/server": "admin", "octo/client": "maintain"}, 3, SetState.APPROVED),
        # A writer of the origin alone approves the origin alone: the others wait for theirs.
        ({"octo/schema": "write", "octo/server": "read", "octo/client": None}, 1, SetState.PROPOSED),
        ({"octo/schema": "write", "octo/server": "triage", "octo/client": "none"}, 1, SetState.PROPOSED),
    ],
)
def test_a_writer_approves_the_repositories_they_can_write_and_no_other(
    permissions: dict[str, str | None], approved_now: int, state: SetState
) -> None:
    after, now = cs.approve(proposed(), "octocat", permissions, T0)
    assert len(now) == approved_now
    assert after.state is state
    assert {m.repository for m in after.members if m.approved_by == "octocat"} == set(now)
    assert after.version == 2


@pytest.mark.parametrize("permission", ["none", "read", "triage", None])
def test_a_stranger_or_reader_approves_nothing(permission: str | None) -> None:
    before = proposed()
    with pytest.raises(ChangeSetRefusedError, match="cannot write any repository still waiting"):
        cs.approve(before, "mallory", dict.fromkeys(INSTALLED, permission), T0)


def test_two_writers_approve_their_own_repositories_and_the_set_is_approved_with_the_last() -> None:
    first, _ = cs.approve(proposed(), "alice", {"octo/schema": "write"}, T0)
    with pytest.raises(ChangeSetRefusedError):  # alice again: nothing of hers is waiting
        cs.approve(first, "alice", {"octo/schema": "write"}, T0)
    second, now = cs.approve(first, "bob", writers(first), T0)
    assert now == ("octo/server", "octo/client")
    assert second.state is SetState.APPROVED
    assert [m.approved_by for m in second.members] == ["alice", "bob", "bob"]


def test_no_work_starts_before_every_repository_is_approved() -> None:
    partly, _ = cs.approve(proposed(), "alice", {"octo/schema": "write"}, T0)
    with pytest.raises(ChangeSetRefusedError, match="cannot become working"):
        cs.start_work(partly, T0)
    with pytest.raises(ChangeSetRefusedError, match="nothing to approve"):
        cs.approve(approved(), "alice", writers(proposed()), T0)


# --- the one check -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gates", "state", "description"),
    [
        (
            (None, None, None),
            "pending",
            "3 of 3 not passing; waiting for octo/schema, octo/server, octo/client",
        ),
        (("ready", "waiting", "ready"), "pending", "1 of 3 not passing; waiting for octo/server"),
        (("ready", "blocked", "waiting"), "pending", "2 of 3 not passing; blocked: octo/server"),
        (("ready", "ready", "ready"), "success", "all 3 pull requests pass their gates"),
    ],
)
def test_the_combined_check_passes_only_when_every_pull_request_passes_its_gate(
    gates: tuple[str | None, ...], state: str, description: str
) -> None:
    found = cs.start_work(approved(), T0)
    for number, (member, gate) in enumerate(zip(found.members, gates, strict=True), start=1):
        found = cs.record_pull_request(found, member.repository, number, T0)
        if gate is not None:
            found = cs.record_gate(found, member.repository, gate, T0)  # type: ignore[arg-type]
    check = cs.combined_check(found)
    assert (check.context, check.state, check.description) == (cs.CHECK_NAME, state, description)
    assert found.state is (SetState.READY if state == "success" else SetState.WORKING)


def test_a_member_without_a_pull_request_keeps_the_check_pending() -> None:
    found = cs.start_work(approved(), T0)
    for member in found.members[:2]:
        found = cs.record_pull_request(found, member.repository, 1, T0)
        found = cs.record_gate(found, member.repository, "ready", T0)
    assert cs.combined_check(found).state == "pending"
    assert found.state is SetState.WORKING
    with pytest.raises(ChangeSetRefusedError, match="not ready"):
        cs.begin_merging(found.model_copy(update={"state": SetState.READY}), T0)


def test_a_gate_going_back_before_merging_takes_the_set_back_to_working() -> None:
    found = cs.record_gate(ready(), "octo/client", "waiting", T0)
    assert found.state is SetState.WORKING
    assert cs.combined_check(found).state == "pending"


@pytest.mark.parametrize(
    ("state", "check"),
    [
        (SetState.MERGED, "success"),
        (SetState.FAILED, "failure"),
        (SetState.REVERTING, "failure"),
        (SetState.ESCALATED, "failure"),
    ],
)
def test_the_check_after_merging(state: SetState, check: str) -> None:
    assert cs.combined_check(ready().model_copy(update={"state": state, "failure": "x"})).state == check


# --- merging, and the failure plan -------------------------------------------------------------


def test_the_set_merges_in_order_and_only_in_order() -> None:
    found = merging()
    assert cs.next_merge(found) == "octo/schema"
    with pytest.raises(ChangeSetRefusedError, match="not the next to merge"):
        cs.record_merged(found, "octo/client", "c", T0)
    for name in ("octo/schema", "octo/server", "octo/client"):
        assert cs.next_merge(found) == name
        found = cs.record_merged(found, name, f"sha-{name}", T0)
    assert found.state is SetState.MERGED and found.over
    assert cs.next_merge(found) is None


@pytest.mark.parametrize(
    ("merged_first", "reverts", "stopped", "then"),
    [
        (0, (), ("octo/schema", "octo/server", "octo/client"), SetState.ESCALATED),
        (1, ("octo/schema",), ("octo/server", "octo/client"), SetState.REVERTING),
        (2, ("octo/server", "octo/schema"), ("octo/client",), SetState.REVERTING),
    ],
)
def test_a_failed_merge_stops_reverts_what_merged_newest_first_and_escalates(
    merged_first: int, reverts: tuple[str, ...], stopped: tuple[str, ...], then: SetState
) -> None:
    found = merging()
    order = cs.merge_order(found)
    for name in order[:merged_first]:
        found = cs.record_merged(found, name, "sha", T0)
    failing = order[merged_first]
    failed, plan = cs.record_merge_failed(found, failing, "a required check went red", T0)
    assert failed.state is SetState.FAILED
    assert (plan.failed, plan.reverts, plan.stopped) == (failing, reverts, stopped)
    assert f"merging {failing} failed (a required check went red)" in plan.escalation
    assert cs.combined_check(failed).state == "failure"
    assert cs.next_merge(failed) is None  # the set stopped: nothing else merges
    if not reverts:
        assert "Nothing had merged" in plan.escalation
        assert cs.escalate(failed, T0).state is SetState.ESCALATED
        return
    with pytest.raises(ChangeSetRefusedError, match="merged part of itself"):
        cs.escalate(failed, T0)  # never left half-merged without its reverts
    with pytest.raises(ChangeSetRefusedError, match="exactly the merged repositories"):
        cs.start_reverting(failed, {failing: 9}, T0)
    reverting = cs.start_reverting(failed, {name: 90 + i for i, name in enumerate(plan.reverts)}, T0)
    assert reverting.state is then
    for name in plan.reverts:
        reverting = cs.record_reverted(reverting, name, T0)
    assert reverting.state is SetState.REVERTED
    assert cs.escalate(reverting, T0).state is SetState.ESCALATED


def test_a_failure_of_a_merge_not_in_progress_is_refused() -> None:
    with pytest.raises(ChangeSetRefusedError, match="not the merge in progress"):
        cs.record_merge_failed(merging(), "octo/client", "conflict", T0)
    with pytest.raises(ChangeSetRefusedError):
        cs.record_merge_failed(ready(), "octo/schema", "conflict", T0)


@pytest.mark.parametrize(
    ("state", "step"),
    [
        (SetState.PROPOSED, lambda c: cs.begin_merging(c, T0)),
        (SetState.WORKING, lambda c: cs.begin_merging(c, T0)),
        (SetState.MERGED, lambda c: cs.record_gate(c, "octo/schema", "ready", T0)),
        (SetState.ESCALATED, lambda c: cs.start_work(c, T0)),
        (SetState.MERGING, lambda c: cs.record_pull_request(c, "octo/schema", 77, T0)),
        (SetState.REVERTED, lambda c: cs.record_reverted(c, "octo/schema", T0)),
    ],
)
def test_a_step_out_of_its_state_is_refused(state: SetState, step: object) -> None:
    with pytest.raises(ChangeSetRefusedError):
        step(ready().model_copy(update={"state": state}))  # type: ignore[operator]


def test_every_step_moves_the_version_forward() -> None:
    steps = [proposed(), approved()]
    steps.append(cs.start_work(steps[-1], T0 + timedelta(seconds=1)))
    assert [s.version for s in steps] == [1, 2, 3]
    assert steps[-1].updated_at == T0 + timedelta(seconds=1)


# --- events ------------------------------------------------------------------------------------


def _valid(event_types: list[str], events: list[DomainEvent]) -> None:
    for event in events:
        schema = json.loads((SCHEMAS / f"{event.detail_type}.json").read_text())
        jsonschema.validate(event.detail(), schema)
    assert [e.detail_type for e in events] == event_types


def test_the_lifecycle_reports_its_events_each_matching_its_schema() -> None:
    created = proposed()
    _valid(["change_set.created.v1"], events_of(None, created, correlation_id="d1"))
    partly, now = cs.approve(created, "alice", {"octo/schema": "write"}, T0)
    events = events_of(created, partly, correlation_id="d2", approved=now, by="alice")
    _valid(["change_set.approved.v1"], events)
    assert events[0].data["waiting"] == ["octo/server", "octo/client"]
    assert (events[0].repository.full_name, events[0].issue, events[0].installation) == ("octo/schema", 5, 77)
    working = cs.start_work(approved(), T0)
    almost = working
    for member in working.members:
        almost = cs.record_pull_request(almost, member.repository, 3, T0)
    for member in working.members[:2]:
        almost = cs.record_gate(almost, member.repository, "ready", T0)
    whole = cs.record_gate(almost, "octo/client", "ready", T0)
    _valid(["change_set.ready.v1"], events_of(almost, whole, correlation_id="d3"))
    started = cs.begin_merging(whole, T0)
    _valid(["change_set.merging.v1"], events_of(whole, started, correlation_id="d4"))
    one = cs.record_merged(started, "octo/schema", "a", T0)
    assert events_of(started, one, correlation_id="d5") == []
    two = cs.record_merged(cs.record_merged(one, "octo/server", "b", T0), "octo/client", "c", T0)
    _valid(["change_set.merged.v1"], events_of(one, two, correlation_id="d6"))
    failed, _ = cs.record_merge_failed(one, "octo/server", "conflict", T0)
    reverting = cs.start_reverting(failed, {"octo/schema": 40}, T0)
    reverted = cs.record_reverted(reverting, "octo/schema", T0)
    events = events_of(reverting, reverted, correlation_id="d7")
    _valid(["change_set.reverted.v1"], events)
    assert events[0].data["reverts"] == [{"repository": "octo/schema", "pr_number": 40}]
    escalated = cs.escalate(reverted, T0)
    events = events_of(reverted, escalated, correlation_id="d8")
    _valid(["change_set.escalated.v1"], events)
    assert events[0].data["failure"] == "merging octo/server failed: conflict"
    assert events[0].data["reverted"] == ["octo/schema"]


def test_an_events_id_is_the_same_on_every_attempt() -> None:
    created = proposed()
    first = events_of(None, created, correlation_id="d1")
    assert [e.id for e in first] == [e.id for e in events_of(None, created, correlation_id="d1-again")]
