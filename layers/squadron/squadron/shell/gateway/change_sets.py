"""Change sets: ``propose_change_set``, the PM's proposal of one change across repositories of its
installation (docs/change-sets.md).

The set's origin is the verified agent's own repository and installation, never the request's: a
proposal cannot name another installation's repository (the desk asks GitHub which repositories
the installation covers now) and gives nobody a right anywhere; a writer of each repository must
approve it. Only a role whose kind may :attr:`~squadron.domain.permissions.Action.PROPOSE_CHANGE_SET`
(the PM) proposes, and only on an issue a writer vouched for (the PM reads strangers' issues: what
it plans reaches other repositories' agents only from there).

The proposal's key is derived from the call (the agent, the issue, the repositories and the
dependencies), so the same call again (a retry of the task's request, the model asking twice)
makes the same set: the desk returns the stored one. The plan is kept as the artifact named after
the set (revised by a later call) and the App posts one comment on the origin issue, under a key
of the set, naming its repositories, merge order and the exact approval command.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import TYPE_CHECKING

from squadron.adapters.github.errors import GitHubError
from squadron.adapters.github.keyed import once
from squadron.domain.change_set_commands import command_text, proposal_answer
from squadron.domain.change_sets import ChangeSet, ChangeSetRefusedError, merge_order
from squadron.domain.effects import marked
from squadron.domain.gateway_wire import ProposeChangeSet, ProposeChangeSetAnswer, PublishArtifact
from squadron.domain.launches import LaunchRefusedError, check_lease
from squadron.domain.permissions import (
    INSTALLATION_PERMISSIONS,
    Action,
    CallerKind,
    PermissionDeniedError,
    agent_caller,
    check,
)
from squadron.domain.vouching import voucher, waits
from squadron.shell.gateway.memory import OPS as MEMORY_OPS
from squadron.shell.gateway.protocol import Answer, Handler
from squadron.shell.gateway.secrets import refuse_secrets
from squadron.shell.gateway.verify import verified

if TYPE_CHECKING:
    from squadron.domain.agents import AgentRecord
    from squadron.shell.gateway.service import AgentGateway

#: How far before the set's creation its proposal comment is looked for (clocks disagree a little).
LOOKBACK = timedelta(minutes=5)


def proposal_key(agent_id: str, request: ProposeChangeSet) -> str:
    """The proposal a call makes: the same agent, issue, repositories and dependencies (in any
    order, any case) are the same proposal, and so the same set."""
    call = {
        "issue": request.issue_number,
        "repositories": sorted({name.lower() for name in request.repositories}),
        "dependencies": sorted({(a.lower(), b.lower()) for a, b in request.dependencies}),
    }
    digest = hashlib.sha256(json.dumps(call, sort_keys=True).encode()).hexdigest()[:24]
    return f"{agent_id}#{digest}"


def comment_key(set_id: str) -> str:
    """The hidden key of a set's proposal comment."""
    return hashlib.sha256(f"change-set-proposal\x00{set_id}".encode()).hexdigest()[:24]


def _propose_change_set(gw: AgentGateway, request: ProposeChangeSet) -> Answer:
    agent = verified(gw, request)
    check_lease(agent, request.launch_token, gw.clock())
    try:
        check(agent_caller(agent), Action.PROPOSE_CHANGE_SET)
    except PermissionDeniedError as exc:
        raise LaunchRefusedError("forbidden", str(exc)) from exc
    desk = gw.change_sets
    if desk is None:
        raise LaunchRefusedError("forbidden", "this deployment keeps no change sets")
    if agent.installation_id is None:
        raise LaunchRefusedError("forbidden", f"agent {agent.agent_id} has no installation")
    triage = gw.config_for(agent).config.triage
    if voucher(gw.registry.issue_view(agent.repo_id, request.issue_number).vouched_by, triage) is None:
        raise LaunchRefusedError("forbidden", f"not proposed: {waits(request.issue_number, triage)}")
    refuse_secrets(gw, agent, "propose_change_set", [("plan", request.plan)])
    try:
        change_set = desk.propose(
            installation_id=agent.installation_id,
            origin=agent.repo_full_name,
            issue=request.issue_number,
            repositories=request.repositories,
            dependencies=request.dependencies,
            proposed_by=agent.agent_id,
            proposal=proposal_key(agent.agent_id, request),
        )
    except ChangeSetRefusedError as exc:
        raise LaunchRefusedError("forbidden", f"change set refused: {exc}") from exc
    except GitHubError as exc:
        raise LaunchRefusedError("github_refused", str(exc)) from exc
    # The plan, as the artifact named after the set (through publish_artifact's own path).
    MEMORY_OPS["publish_artifact"](
        gw,
        PublishArtifact(
            agent_id=request.agent_id,
            launch_token=request.launch_token,
            secret=request.secret,
            name=change_set.id,
            content=request.plan,
            issue_number=request.issue_number,
        ),
    )
    plan = f"`{change_set.id}` of #{change_set.issue}"
    _announce(gw, agent, change_set, plan)
    return Answer(
        ProposeChangeSetAnswer(
            set_id=change_set.id,
            state=change_set.state.value,
            repositories=[m.repository for m in change_set.members],
            merge_order=list(merge_order(change_set)),
            plan=plan,
            approve_with=command_text(change_set.id),
        )
    )


def _announce(gw: AgentGateway, agent: AgentRecord, change_set: ChangeSet, plan: str) -> None:
    """The proposal comment on the origin issue, once (looked up by its key first)."""
    client = gw.client(agent, INSTALLATION_PERMISSIONS[CallerKind.PM])
    key, number, since = comment_key(change_set.id), change_set.issue, change_set.created_at - LOOKBACK
    try:
        if client.find_comment(number, key, gw.bot_login, since) is None:
            body = marked(proposal_answer(change_set, plan), key)
            once(
                lambda: client.comment(number, body),
                lambda: client.find_comment(number, key, gw.bot_login, since),
            )
    except GitHubError as exc:
        raise LaunchRefusedError(
            "github_refused", f"change set {change_set.id} is stored; its proposal was not posted: {exc}"
        ) from exc


#: The PM's proposal of a change set.
OPS: dict[str, Handler] = {"propose_change_set": _propose_change_set}
