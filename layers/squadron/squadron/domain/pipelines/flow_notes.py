"""What a repository's approval flows say that their pipelines do not say as written — pure
(docs/pipelines.md, "Approval flows as pipelines"): each a :class:`Note` at its key path in
approval-flows.yaml, so ``squadron validate --migrate`` never drops a construct silently.
:mod:`squadron.domain.pipelines.from_flows` makes the pipelines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from squadron.domain.pipelines.limits import MAX_HUMAN_COUNT, MAX_STAGE_TIMEOUT
from squadron.domain.repo_config.flows import AGENT_PREFIX
from squadron.domain.repo_config.models import (
    ApprovalFlow,
    ApprovalFlowsFile,
    BranchRule,
    EscalationRule,
    ProtectedPath,
    ReviewRequirement,
)

KeyPath = tuple[str | int, ...]
GROUP_PREFIX = "human_group:"
#: The pipeline a PR into a branch no literal rule names runs.
DEFAULT_NAME = "approval-default"
#: The label every escalation adds (``__escalate__``); another label is added by ``on_error``.
ESCALATION_LABEL = "needs-human"
_GLOB_CHARS = re.compile(r"[*?\[\]]")


@dataclass(frozen=True)
class Note:
    """Something of the approval flows a pipeline does not express as written: ``path`` is its key
    path in approval-flows.yaml."""

    path: KeyPath
    message: str


def is_literal(pattern: str) -> bool:
    """Whether a branch rule's fnmatch ``pattern`` names one branch (a trigger can name it)."""
    return not _GLOB_CHARS.search(pattern)


def _review_notes(at: KeyPath, reviews: Sequence[ReviewRequirement] | None) -> list[Note]:
    notes: list[Note] = []
    auto_agents: list[str] = []
    for index, review in enumerate(reviews or ()):
        path = (*at, "required_reviews", index)
        if not review.required:
            notes.append(
                Note(
                    (*path, "required"),
                    f"{review.role} is not required: nothing gates on it",
                )
            )
            continue
        if review.role.startswith(GROUP_PREFIX):
            group = review.role.removeprefix(GROUP_PREFIX)
            notes.append(
                Note(
                    (*path, "role"),
                    f"{review.role}: human_approved counts the approval of anyone with write access "
                    f"(membership of {group!r} is not checked); the merge gate (merge_pr) still "
                    "requires the group. "
                    f"A human stage `from: {group}` waits for the group itself",
                )
            )
            if review.min_approvals > MAX_HUMAN_COUNT:
                notes.append(
                    Note(
                        (*path, "min_approvals"),
                        f"{review.min_approvals} approvals: a gate check waits for at most "
                        f"{MAX_HUMAN_COUNT} (MAX_HUMAN_COUNT)",
                    )
                )
        elif review.auto_assign:
            auto_agents.append(review.role.removeprefix(AGENT_PREFIX))
    if auto_agents:
        notes.append(
            Note(
                (*at, "required_reviews"),
                f"auto_assign of {', '.join(auto_agents)}: Squadron's routing starts these review agents "
                "when the PR opens; a gate only waits for their verdict (squadron/<role>)",
            )
        )
    return notes


def _escalation_notes(at: KeyPath, escalation: Any) -> list[Note]:
    if escalation is None:
        return []
    notes: list[Note] = []
    for trigger in ("on_ci_failure", "on_review_rejection"):
        rule: EscalationRule | None = getattr(escalation, trigger)
        if rule is not None and rule.max_retries is not None:
            notes.append(
                Note(
                    (*at, "escalation", trigger),
                    f"{trigger} (max_retries {rule.max_retries}): the dev agent's fix rounds are no gate; "
                    "a pipeline with the dev agent's stage says it as the gate's "
                    f"on_fail: {{goto: <dev stage>, max_iterations: {max(rule.max_retries, 1)}, then: escalate}}",
                )
            )
    rule = escalation.on_timeout
    if rule is None:
        return notes
    path = (*at, "escalation", "on_timeout")
    if rule.hours is not None and rule.hours * 3600 > MAX_STAGE_TIMEOUT:
        notes.append(
            Note(
                (*path, "hours"),
                f"{rule.hours}h is over a stage's longest timeout (7d, MAX_STAGE_TIMEOUT): each gate waits 7d",
            )
        )
    if rule.hours is not None:
        notes.append(
            Note(
                (*path, "hours"),
                "the wait is each gate's timeout, counted from when the run reaches that gate "
                "(not from when the PR opened)",
            )
        )
    groups = [who for who in rule.notify if who.startswith(GROUP_PREFIX)]
    others = [who for who in rule.notify if not who.startswith(GROUP_PREFIX)] + groups[1:]
    if others:
        notes.append(
            Note(
                (*path, "notify"),
                f"notify {', '.join(others)}: a gate's on_timeout tells one human group; "
                + (f"only {groups[0]} is told" if groups else "nobody is told"),
            )
        )
    if rule.assign:
        notes.append(
            Note((*path, "assign"), f"assign {', '.join(rule.assign)}: no pipeline action assigns people")
        )
    if rule.label and rule.label != ESCALATION_LABEL:
        notes.append(
            Note(
                (*path, "label"),
                f"label {rule.label!r}: an escalated run adds {ESCALATION_LABEL!r}; {rule.label!r} is "
                "added by the pipeline's on_error, which also runs when the run fails",
            )
        )
    return notes


def _policy_notes(at: KeyPath, flow: ApprovalFlow | BranchRule) -> list[Note]:
    policy = flow.merge_policy
    if policy is None:
        return []
    notes: list[Note] = []
    checks = flow.required_status_checks
    if policy.require_ci_pass is False and checks:
        notes.append(
            Note(
                (*at, "merge_policy", "require_ci_pass"),
                f"require_ci_pass is false: {', '.join(checks)} gate nothing (no ci_status check)",
            )
        )
    if policy.require_human:
        notes.append(
            Note(
                (*at, "merge_policy", "require_human"),
                "require_human: a person merges; the pipeline ends when its gates pass (no merge_pr)",
            )
        )
    elif policy.auto_merge is False:
        notes.append(
            Note(
                (*at, "merge_policy", "auto_merge"),
                "auto_merge is off: a person merges; the pipeline ends when its gates pass (no merge_pr)",
            )
        )
    return notes


def _path_notes(at: KeyPath, paths: Sequence[ProtectedPath] | None) -> list[Note]:
    notes: list[Note] = []
    for index, protected in enumerate(paths or ()):
        if not any(review.required for review in protected.required_reviews) and not protected.require_human:
            notes.append(
                Note(
                    (*at, "protected_paths", index),
                    "adds no required review: no gate",
                )
            )
        notes += _review_notes((*at, "protected_paths", index), protected.required_reviews)
    return notes


def flow_notes(flows: ApprovalFlowsFile) -> list[Note]:
    """Every construct of the file that a pipeline does not say as written, at its key path."""
    sources: list[tuple[KeyPath, ApprovalFlow | BranchRule]] = [(("default",), flows.default)]
    sources += [(("branch_rules", index), rule) for index, rule in enumerate(flows.branch_rules)]
    notes: list[Note] = []
    for at, flow in sources:
        if isinstance(flow, BranchRule) and not is_literal(flow.pattern):
            notes.append(
                Note(
                    (*at, "pattern"),
                    f"pattern {flow.pattern!r} names no one branch and a trigger's base_branch names one: "
                    f"PRs into branches it matches run {DEFAULT_NAME} (the default flow's gates), and the "
                    "rule still applies through merge_pr's merge gate; add a pipeline per branch it "
                    "covers (trigger base_branch: <branch>)",
                )
            )
        notes += _review_notes(at, flow.required_reviews)
        notes += _policy_notes(at, flow)
        notes += _path_notes(at, flow.protected_paths)
        notes += _escalation_notes(at, flow.escalation)
    return notes
