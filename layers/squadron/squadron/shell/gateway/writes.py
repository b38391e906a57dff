"""GitHub writes an agent asks for (``github``): checked against its role and the write policy,
carried out here with a token narrowed to the role, once per key, and reported to the router."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, assert_never

from pydantic import ValidationError

from squadron.adapters.github.client import GitHubClient
from squadron.adapters.github.errors import GitHubError
from squadron.adapters.github.keyed import once
from squadron.domain.agents import AgentRecord, ConflictError, RoleKind
from squadron.domain.commands import (
    AgentAction,
    AgentAssignedIssue,
    AgentOpenedIssue,
    AgentOpenedPullRequest,
    AgentPostedStatus,
    AgentPushedCommits,
    AgentSubmittedReview,
)
from squadron.domain.effects import marked
from squadron.domain.event_trimming import issue_fields, pull_request_fields, review_fields, status_fields
from squadron.domain.events import EnvelopeError
from squadron.domain.gateway_wire import (
    GitHubWrite,
    GitHubWriteRequest,
    WriteAnswer,
    WriteAssignees,
    WriteComment,
    WriteIssue,
    WriteLabels,
    WritePull,
    WriteReview,
    WriteStatus,
)
from squadron.domain.launches import LaunchRefusedError, check_lease
from squadron.domain.markers import inert
from squadron.domain.memory import pr_section
from squadron.domain.permissions import (
    INSTALLATION_PERMISSIONS,
    Action,
    PermissionDeniedError,
    caller_kind,
    check,
)
from squadron.domain.retrospective import ROLE as RETRO_ROLE
from squadron.domain.retrospective import ActionItem, RetroRecord
from squadron.domain.write_policy import (
    approves,
    assignees_refusal,
    base_refusal,
    bound_commit,
    labels_refusal,
    subject_refusal,
)
from squadron.domain.writes import belongs_to
from squadron.shell.conditional import read_change_put
from squadron.shell.gateway.protocol import Answer, Handler
from squadron.shell.gateway.secrets import refuse_secrets
from squadron.shell.gateway.verify import verified

if TYPE_CHECKING:
    from squadron.shell.gateway.service import AgentGateway

logger = logging.getLogger(__name__)


#: What each kind of agent does on GitHub that the router must hear of (the App's own webhooks
#: are dropped at the ingress): the gateway reports it from GitHub's answer to the write.
_REVIEW_STATES = {"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED"}
REPORTED: dict[RoleKind, frozenset[str]] = {
    RoleKind.PM: frozenset({"agent_assigned_issue"}),
    RoleKind.DEV: frozenset({"agent_opened_issue", "agent_opened_pull_request", "agent_pushed_commits"}),
    RoleKind.REVIEW: frozenset({"agent_submitted_review", "agent_posted_status"}),
}


#: How far before a write's claim its creation is looked for (clocks differ a little).
WRITE_LOOKBACK = timedelta(minutes=5)


def _keyed(body: str, key: str | None) -> str:
    """``body`` marked with the write's key (found again by it), or as it is without one."""
    return marked(body, key) if key is not None else body


def _written(
    client: GitHubClient, write: GitHubWriteRequest, key: str, bot_login: str, since: datetime
) -> Any | None:
    """What an earlier request of the keyed ``write`` created, found by its marker in what the
    App wrote (a stranger's copy of a marker is never taken), a pull request by its head branch;
    None when GitHub shows nothing (each lookup reads every page, or raises). Writes GitHub
    makes idempotent are simply carried out again (None)."""
    match write:
        case WriteComment():
            return client.find_comment(write.number, key, bot_login, since)
        case WriteIssue():
            return client.find_issue(key, bot_login, since)
        case WritePull():
            return client.find_pull(write.head.split(":")[-1], key, bot_login, since)
        case WriteReview():
            return client.find_review(write.number, key, bot_login)
        case WriteStatus() | WriteLabels() | WriteAssignees():
            return None
        case _:
            assert_never(write)


def inert_write(write: GitHubWriteRequest) -> GitHubWriteRequest:
    """``write`` with the agent's words (bodies, titles, a status's description) made unable to
    carry a framework marker (:func:`squadron.domain.markers.inert`) before they are posted."""
    fields = {
        name: inert(value)
        for name in ("title", "body", "description")
        if isinstance(value := getattr(write, name, None), str)
    }
    return write.model_copy(update=fields)


def _github_write(gw: AgentGateway, request: GitHubWrite) -> Answer:
    """Carry out a write the task asked for, as the agent's role, with the role's narrowed token.

    The caller (kind, name, role, branch) comes from the agent's record, never from the task;
    the role table decides (GitHubClient checks it before every call), and the subjects a role
    may write on are checked here: its own issue or pull request, its own pull request's head.
    """
    agent = verified(gw, request)
    check_lease(agent, request.launch_token, gw.clock())
    if agent.installation_id is None:
        raise LaunchRefusedError("forbidden", f"agent {agent.agent_id} has no installation")
    _no_secrets(gw, agent, request.write)
    client = gw.client(agent, INSTALLATION_PERMISSIONS[caller_kind(agent.kind)])
    write = inert_write(request.write)  # no framework marker in what the App posts for it
    key = request.key
    repeated = _repeated_write(gw, agent, request, client, key) if key is not None else None
    if repeated is not None:
        return repeated
    pull: dict[str, Any] | None = None  # the agent's PR, when the write read it (its report reuses it)
    try:
        write = _policed(gw, agent, client, write)
        result: Any
        match write:
            case WriteComment():
                result = _once(
                    gw, client, write, key, lambda: client.comment(write.number, _keyed(write.body, key))
                )
            case WriteIssue():
                result = _once(
                    gw,
                    client,
                    write,
                    key,
                    lambda: client.create_issue(write.title, _keyed(write.body, key), labels=write.labels),
                )
            case WritePull():
                body = _keyed(_with_proposals(gw, agent, write.body), key)
                result = _once(
                    gw,
                    client,
                    write,
                    key,
                    lambda: client.create_pull(
                        title=write.title, head=write.head, base=write.base, body=body, draft=write.draft
                    ),
                )
            case WriteReview():
                result = _once(
                    gw,
                    client,
                    write,
                    key,
                    lambda: client.create_review(
                        write.number,
                        write.event,
                        _keyed(write.body, key),
                        commit_id=write.commit_id,
                    ),
                )
            case WriteStatus():
                pull = _own_head(agent, client, write.sha)
                result = client.create_status(
                    write.sha, state=write.state, context=write.context, description=write.description
                )
            case WriteLabels():
                result = client.add_labels(write.number, write.labels)
            case WriteAssignees():
                result = client.add_assignees(write.number, write.assignees)
            case _:
                assert_never(write)
        try:
            action = _action_of(gw, agent, write, result, client, pull_read=pull)
        except ValidationError as exc:  # GitHub answered something no webhook would carry
            raise LaunchRefusedError(
                "github_refused", f"done, but GitHub's answer could not be reported to the router: {exc}"
            ) from exc
    except PermissionDeniedError as exc:
        raise LaunchRefusedError("forbidden", str(exc)) from exc
    except GitHubError as exc:
        raise LaunchRefusedError("github_refused", str(exc)) from exc
    return _written_by(gw, agent, request, result, action)


def _once(
    gw: AgentGateway,
    client: GitHubClient,
    write: GitHubWriteRequest,
    key: str | None,
    send: Callable[[], Any],
) -> Any:
    """``send`` a write that creates something; when GitHub may have applied it without
    saying so, what it created is looked up by the write's key before it is sent again
    (:func:`~squadron.adapters.github.keyed.once`). Without a key nothing can be looked up:
    GitHub's silence is the task's to hear."""
    if key is None:
        return send()
    since = gw.clock() - WRITE_LOOKBACK
    return once(send, lambda: _written(client, write, key, gw.bot_login, since))


def _written_by(
    gw: AgentGateway, agent: AgentRecord, request: GitHubWrite, result: Any, action: AgentAction | None
) -> Answer:
    """A write carried out: the router told, the answer kept under the write's key, a
    retrospective's action item tracked; GitHub's answer for the task."""
    if action is not None:
        _report(gw, agent, request.launch_token, action)
    if request.key is not None:
        gw.registry.record_write(agent.agent_id, request.key, result)
    write = request.write
    if agent.role == RETRO_ROLE and isinstance(write, WriteIssue | WritePull) and isinstance(result, dict):
        _track(gw, agent, write, result)
    return Answer(WriteAnswer(result=result))


def _repeated_write(
    gw: AgentGateway, agent: AgentRecord, request: GitHubWrite, client: GitHubClient, key: str
) -> Answer | None:
    """The answer to a write whose key was claimed before (None: a first request, carry it out).

    The kept answer if the first request recorded one; else what the first created, found on
    GitHub by its marker (and reported to the router, under the id GitHub's answer fixes, in
    case the first died before it could); None when nothing is there (it never got that far).
    """
    if not belongs_to(key, request.launch_token):
        raise LaunchRefusedError("forbidden", f"write key {key} is not of this task's launch")
    claim = gw.registry.claim_write(agent.agent_id, key, gw.clock())
    if claim is None:
        return None
    if claim.result is not None:
        return Answer(WriteAnswer(result=claim.result, repeated=True))
    since = claim.claimed_at - WRITE_LOOKBACK
    write = request.write
    try:
        found = _written(client, write, key, gw.bot_login, since)
        if found is None:
            return None
        action = _action_of(gw, agent, write, found, client, pull_read=None)
    except (GitHubError, ValidationError) as exc:
        raise LaunchRefusedError(
            "github_refused", f"write {key} was asked before and could not be looked up: {exc}"
        ) from exc
    answer = _written_by(gw, agent, request, found, action)
    return Answer(answer.reply.model_copy(update={"repeated": True}))


def _track(
    gw: AgentGateway, agent: AgentRecord, write: WriteIssue | WritePull, result: dict[str, Any]
) -> None:
    """A retrospective's agent opened an action item (an issue) or its pull request: tracked
    on its retrospective, so the next one reports what became of it."""
    number = result.get("number")
    if gw.retros is None or agent.issue_number is None or not isinstance(number, int):
        return
    kind: Literal["issue", "pull_request"] = "pull_request" if isinstance(write, WritePull) else "issue"
    item = ActionItem(text=write.title[:500], kind=kind, number=number)
    retros = gw.retros

    def tracked(held: RetroRecord | None) -> RetroRecord | None:
        if held is None:
            return None  # not a retrospective's issue (a role named so by hand): nothing to track
        tracked = held.with_item(item)
        return tracked if tracked != held else None

    try:
        read_change_put(
            lambda: next(
                (r for r in retros.retrospectives(agent.repo_id) if r.issue_number == agent.issue_number),
                None,
            ),
            tracked,
            lambda held, tracked: retros.put_retrospective(
                tracked, held.version if held is not None else None
            ),
        )
    except ConflictError:
        logger.warning(
            "%s: action item #%s not tracked: its retrospective kept changing", agent.agent_id, number
        )


def _with_proposals(gw: AgentGateway, agent: AgentRecord, body: str) -> str:
    """``body`` with the agent's facts awaiting confirmation listed (a person's merge confirms
    them): whoever merges reads what they confirm."""
    if gw.memory is None:
        return body
    policy = gw.config_for(agent).config.memory
    section = pr_section(gw.memory.proposals(agent.repo_id, agent.agent_id, policy=policy))
    return f"{body}\n\n{section}" if section else body


def _no_secrets(gw: AgentGateway, agent: AgentRecord, write: GitHubWriteRequest) -> None:
    """Refused (``secret_found``, counted) when the agent's words in ``write`` carry a secret:
    the agent hears its kind and place, never its value, and nothing reaches GitHub."""
    texts = [(name, getattr(write, name, None)) for name in ("title", "body", "description")]
    refuse_secrets(gw, agent, write.action, texts)


def _policed(
    gw: AgentGateway, agent: AgentRecord, client: GitHubClient, write: GitHubWriteRequest
) -> GitHubWriteRequest:
    """``write`` as the write policy (:mod:`squadron.domain.write_policy`) allows it, an
    approval bound to its pull request's head; refused with the rule's reason. Checked
    before any GitHub write, on what the repository's configuration and GitHub say now."""
    caller = client.caller
    reason = subject_refusal(
        caller.kind,
        agent.display_name,
        write.action,
        getattr(write, "number", 0),
        issue=agent.issue_number,
        pr=agent.pr_number,
    )
    match write:
        case WriteLabels() | WriteIssue() if reason is None:
            if isinstance(write, WriteLabels):
                check(caller, Action.LABEL)  # the role first, then which labels
            reason = labels_refusal(
                caller.kind,
                write.labels,
                gw.config_for(agent).config.labels,
                role=agent.role,
                opening=isinstance(write, WriteIssue),
            )
        case WritePull() if reason is None:
            check(caller, Action.OPEN_PR, branch=write.head)  # its own branch, then where to
            flows = gw.config_for(agent).approval_flows
            default = str(client.get_repository().get("default_branch") or "")
            reason = base_refusal(write.base, write.head, default_branch=default, flows=flows)
        case WriteReview() if reason is None and approves(write.event, write.verdict):
            head = str((client.get_pull(write.number).get("head") or {}).get("sha") or "")
            commit, reason = bound_commit(write.number, write.event, write.verdict, write.commit_id, head)
            write = write.model_copy(update={"commit_id": commit})
        case WriteAssignees() if reason is None:
            check(caller, Action.ASSIGN)  # the role first, then whom
            reason = assignees_refusal(write.assignees, gw.bot_login)
        case _:
            pass
    if reason is not None:
        raise LaunchRefusedError("forbidden", reason)
    return write


def _own_head(agent: AgentRecord, client: GitHubClient, sha: str) -> dict[str, Any]:
    """The agent's own pull request, read to check that ``sha`` is its head (refused if not)."""
    if agent.pr_number is None:
        raise LaunchRefusedError("forbidden", f"{agent.display_name} has no pull request")
    pull: dict[str, Any] = client.get_pull(agent.pr_number)
    if sha != str(pull.get("head", {}).get("sha") or ""):
        raise LaunchRefusedError(
            "forbidden", f"{agent.display_name} posts its status on its pull request's head only"
        )
    return pull


def _action_of(
    gw: AgentGateway,
    agent: AgentRecord,
    write: GitHubWriteRequest,
    result: Any,
    client: GitHubClient,
    *,
    pull_read: dict[str, Any] | None,
) -> AgentAction | None:
    """What the router must hear of ``write``, built from GitHub's answer ``result`` (or None)."""
    answer = result if isinstance(result, dict) else {}
    bot_login = gw.bot_login
    action: AgentAction | None = None
    match write:
        case WriteIssue():
            action = AgentOpenedIssue(issue=issue_fields(answer))
        case WriteAssignees():
            action = AgentAssignedIssue(issue=issue_fields(answer))
        case WritePull():
            action = AgentOpenedPullRequest(pull_request=pull_request_fields(answer))
        case WriteReview():
            pull = client.get_pull(write.number)
            review = dict(answer)
            own = (pull.get("user") or {}).get("login") == bot_login
            if write.verdict is not None and write.event == "COMMENT" and own:
                review["state"] = _REVIEW_STATES[write.verdict]  # what the comment-review means
            action = AgentSubmittedReview(
                review=review_fields(review), pull_request=pull_request_fields(pull)
            )
        case WriteStatus():
            pull = pull_read if pull_read is not None else client.get_pull(agent.pr_number or 0)
            status = {
                **answer,
                "sha": write.sha,
                "state": write.state,  # as GitHub took them (the write succeeded)
                "context": write.context,
                "description": write.description,
                "branches": [{"name": (pull.get("head") or {}).get("ref")}],
            }
            action = AgentPostedStatus(status=status_fields(status), pr_number=int(pull["number"]))
        case WriteComment() | WriteLabels():
            return None
        case _:
            assert_never(write)
    return action if action is not None and action.type in REPORTED[agent.kind] else None


def _report(gw: AgentGateway, agent: AgentRecord, launch_token: str, action: AgentAction) -> None:
    """Put ``action`` on events.fifo for the router, under an id GitHub's answer fixes."""
    subject = {
        AgentOpenedIssue: lambda a: f"issue-{a.issue.number}",
        AgentAssignedIssue: lambda a: f"assign-{a.issue.number}",
        AgentOpenedPullRequest: lambda a: f"pr-{a.pull_request.number}",
        AgentPushedCommits: lambda a: f"push-{a.pull_request.head_sha[:12]}",
        AgentSubmittedReview: lambda a: f"review-{a.review.id}",
        AgentPostedStatus: lambda a: f"status-{a.status.sha[:12]}-{a.status.state}",
    }[type(action)](action)
    envelope = gw.stamped(agent, action, f"agent-{launch_token}-{subject}")
    try:
        envelope.to_message()
    except EnvelopeError as exc:
        raise LaunchRefusedError("invalid_request", str(exc)) from exc
    gw.queue.send(envelope)


#: GitHub writes: carried out as the agent's role, reported to the router from GitHub's answer.
OPS: dict[str, Handler] = {"github": _github_write}
