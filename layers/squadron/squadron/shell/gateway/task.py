"""The task's own operations: whoami, its lease (begin, heartbeat, release), its inbox, its
credentials (a read token, a push token, the model key), what it tells the router (send) and its
metrics."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from typing import TYPE_CHECKING

from squadron.adapters.github.blockers import blocker_refused
from squadron.adapters.github.errors import GitHubError
from squadron.domain import lifecycle
from squadron.domain.agents import (
    AgentRecord,
    AgentStatus,
    ConflictError,
    RoleKind,
    current_inbox,
    inbox_keys,
    inbox_page,
)
from squadron.domain.commands import AgentPushedCommits, RegisterBlocker, TaskEnded
from squadron.domain.effects import AgentWrite
from squadron.domain.event_trimming import pull_request_fields
from squadron.domain.events import EnvelopeError, EventEnvelope
from squadron.domain.gateway_wire import (
    AckAnswer,
    AckInbox,
    Begin,
    BeginAnswer,
    Blocker,
    Ended,
    GitHubToken,
    Heartbeat,
    HeartbeatAnswer,
    InboxAnswer,
    IssueSpend,
    IssueSpendAnswer,
    MetricsAnswer,
    ModelKey,
    ModelKeyAnswer,
    PublishMetrics,
    Pushed,
    PushToken,
    ReadInbox,
    Release,
    ReleaseAnswer,
    Send,
    SendAnswer,
    TokenAnswer,
    WhoAmI,
    WhoAmIAnswer,
)
from squadron.domain.issue_budget import LiveSpend, issue_spend
from squadron.domain.launches import LEASE_TTL, LaunchRefusedError, check_lease, check_push
from squadron.domain.metrics import CATALOGUE, MetricPoint, point
from squadron.domain.permissions import PUSH_PERMISSIONS, TASK_READ_PERMISSIONS
from squadron.domain.repo_config.constants import BYOK_SECRET_PREFIX
from squadron.domain.repo_config.models import ByokProvider
from squadron.shell.conditional import read_change_put
from squadron.shell.gateway.protocol import Answer, Handler
from squadron.shell.gateway.secrets import ended_unleaked, refuse_secrets
from squadron.shell.gateway.verify import verified, verified_release

if TYPE_CHECKING:
    from squadron.shell.gateway.service import AgentGateway


def _whoami(gw: AgentGateway, request: WhoAmI) -> Answer:
    agent = verified(gw, request)
    return Answer(WhoAmIAnswer(agent=agent, bot_login=gw.bot_login))


def _release(gw: AgentGateway, request: Release) -> Answer:
    verified_release(gw, request)  # the only call a replaced launch's task may make
    gw.registry.release_lease(request.agent_id, request.launch_token, gw.clock())
    return Answer(ReleaseAnswer(released=True))


def _inbox(gw: AgentGateway, request: ReadInbox) -> Answer:
    agent = verified(gw, request)
    # What its generation reads (an item held for a later-started generation is not its news).
    items = current_inbox(agent, gw.registry.pending_inbox(request.agent_id))
    page, more = inbox_page(items)
    return Answer(InboxAnswer(items=page, more=more, keys=inbox_keys(items)))


def _github_token(gw: AgentGateway, request: GitHubToken) -> Answer:
    agent = verified(gw, request)
    check_lease(agent, request.launch_token, gw.clock())
    return _token(gw, agent, TASK_READ_PERMISSIONS)


def _push_token(gw: AgentGateway, request: PushToken) -> Answer:
    # Also while winding down: the task's one save of its work on its own branch, as the router
    # puts its agent to sleep (check_push says how narrowly, and why here).
    agent = verified(gw, request, winding_down=True)
    check_push(agent, request.launch_token, gw.clock())
    return _token(gw, agent, PUSH_PERMISSIONS)


def _begin(gw: AgentGateway, request: Begin) -> Answer:
    agent = verified(gw, request)
    now = gw.clock()
    check_lease(agent, request.launch_token, now)
    try:
        agent = gw.registry.acquire_lease(agent.agent_id, request.launch_token, now, LEASE_TTL)
    except ConflictError as exc:
        raise LaunchRefusedError("lease_held", f"the lease of {agent.agent_id} is held: {exc}") from exc
    # A first task moves its agent to ACTIVE (the lifecycle's begin), on the version just read;
    # a router's write in between is read again and decided again.
    leased = agent

    def reread() -> AgentRecord:
        found = gw.registry.get_agent(leased.agent_id)
        if found is None:
            raise LaunchRefusedError("unknown_agent", f"{leased.agent_id} vanished")
        return found

    with suppress(ConflictError):  # the router keeps changing it: the task goes on with its lease
        read_change_put(
            reread,
            lambda agent: lifecycle.begin(agent, now=now),
            lambda agent, begun: gw.registry.put_agent(AgentWrite(begun, agent.version)),
            first=lambda: leased,
        )
    uid = gw.registry.claim_uid(agent.agent_id, now)
    agent = gw.registry.get_agent(agent.agent_id) or agent
    return Answer(BeginAnswer(agent=agent, uid=uid))


def _heartbeat(gw: AgentGateway, request: Heartbeat) -> Answer:
    agent = verified(gw, request, winding_down=True)
    if agent.status not in (AgentStatus.ACTIVE, AgentStatus.CREATED):
        return Answer(HeartbeatAnswer(status=agent.status.value))  # the task winds down; nothing to renew
    try:
        renewed = gw.registry.acquire_lease(agent.agent_id, request.launch_token, gw.clock(), LEASE_TTL)
    except ConflictError as exc:
        raise LaunchRefusedError("lease_lost", f"the lease of {agent.agent_id} is another task's") from exc
    return Answer(HeartbeatAnswer(status=renewed.status.value))


def _ack(gw: AgentGateway, request: AckInbox) -> Answer:
    agent = verified(gw, request)
    foreign = [item for item in request.items if item.agent_id != agent.agent_id]
    if foreign:
        raise LaunchRefusedError("forbidden", f"{agent.agent_id} may acknowledge only its own inbox")
    gw.registry.ack_inbox(agent.agent_id, list(request.items))
    return Answer(AckAnswer(acknowledged=len(request.items)))


def _token(gw: AgentGateway, agent: AgentRecord, permissions: Mapping[str, str]) -> Answer:
    """An installation token for the verified ``agent``'s repository with ``permissions`` (never
    its role's)."""
    if agent.installation_id is None:
        raise LaunchRefusedError("forbidden", f"agent {agent.agent_id} has no installation")
    token = gw.app.installation_token(
        agent.installation_id, repositories=(agent.repo_full_name,), permissions=permissions
    )
    return Answer(
        TokenAnswer(
            token=token.token,
            expires_at=token.expires_at,
            repository=agent.repo_full_name,
            permissions=dict(permissions),
        ),
        secret=True,
    )


def _model_key(gw: AgentGateway, request: ModelKey) -> Answer:
    agent = verified(gw, request)
    check_lease(agent, request.launch_token, gw.clock())
    provider = gw.config_for(agent).role(agent.role).provider
    if isinstance(provider, ByokProvider):
        secret_id = provider.api_key_secret
        # The configuration was validated already; this is the door, so check again.
        if not secret_id.split(":secret:", 1)[-1].startswith(BYOK_SECRET_PREFIX):
            raise LaunchRefusedError("forbidden", f"{secret_id} is not under {BYOK_SECRET_PREFIX}")
        return Answer(ModelKeyAnswer(kind="byok", key=gw.secrets.get(secret_id)), secret=True)
    if gw.copilot_token_secret is None:
        return Answer(ModelKeyAnswer(kind="none"))
    return Answer(ModelKeyAnswer(kind="copilot", key=gw.secrets.get(gw.copilot_token_secret)), secret=True)


def _issue_spend(gw: AgentGateway, request: IssueSpend) -> Answer:
    """Keep what the task has spent so far for its issue's other agents; what they have spent.

    Asked by the task's model gateway before each call it admits (and once when the session
    ends), so every agent of an issue judges the issue's budget by the others' spend up to their
    last call (:mod:`squadron.domain.issue_budget`: the overrun bound). Also while winding down:
    the last report after the session lands before the task's end is routed.
    """
    agent = verified(gw, request, winding_down=True)
    issue = agent.costed_issue
    if issue is None:  # the PM's cost counts for no issue
        return Answer(IssueSpendAnswer(others_usd=0.0))
    spend = LiveSpend(
        agent.agent_id, request.launch_token, request.tokens, request.active_seconds, gw.clock()
    )
    gw.registry.record_live_spend(agent.repo_id, issue, spend)
    view = gw.registry.issue_view(agent.repo_id, issue)
    prs = [gw.registry.issue_view(agent.repo_id, pr) for pr in sorted(view.pull_requests)]
    prices = gw.config_for(agent).config.pricing
    others = issue_spend(issue, view, prs, prices, excluding=agent.agent_id)
    return Answer(IssueSpendAnswer(others_usd=others.total_usd, issue=issue))


def _send(gw: AgentGateway, request: Send) -> Answer:
    message = request.message
    agent = verified(gw, request, winding_down=isinstance(message, Ended))
    if isinstance(message, Ended):
        message = ended_unleaked(gw, agent, message)  # the router posts its words
    envelope = _envelope(gw, agent, request.launch_token, message)
    if isinstance(message, Blocker):
        refuse_secrets(gw, agent, "register_blocker", [("note", message.note)])  # the router posts it
        _check_blocker(gw, agent, message.blocker_number)
    try:
        envelope.to_message()  # within the queue's size, or refused (never a crash of the send)
    except EnvelopeError as exc:
        raise LaunchRefusedError("invalid_request", str(exc)) from exc
    message_id = gw.queue.send(envelope)
    return Answer(SendAnswer(message_id=message_id, delivery_id=envelope.delivery_id))


def _envelope(
    gw: AgentGateway, agent: AgentRecord, launch_token: str, message: Pushed | Blocker | Ended
) -> EventEnvelope:
    """The envelope ``agent``'s task may put on events.fifo for ``message``, or refused."""
    match message:
        case Pushed():
            return _pushed(gw, agent, launch_token)
        case Blocker():
            kind = agent.kind
            if kind is RoleKind.REVIEW:
                raise LaunchRefusedError("forbidden", f"a {kind} agent does not register blockers")
            own = agent.issue_number
            if kind is RoleKind.DEV and message.issue_number != own:
                raise LaunchRefusedError(
                    "forbidden", f"{agent.agent_id} registers blockers of its own issue (#{own}) only"
                )
            if message.sleep and kind is not RoleKind.DEV:
                raise LaunchRefusedError("forbidden", "only a dev agent sleeps on a blocker")
            command: RegisterBlocker | TaskEnded = RegisterBlocker(
                issue_number=message.issue_number,
                blocker_number=message.blocker_number,
                agent_id=agent.agent_id if kind is RoleKind.DEV else None,
                launch_token=launch_token if kind is RoleKind.DEV else None,
                sleep=message.sleep,
                note=message.note,
            )
            what = message.what
        case Ended():
            command = TaskEnded(
                agent_id=agent.agent_id,
                launch_token=launch_token,
                issue_number=agent.issue_number,
                outcome=message.outcome,
                reason=message.reason,
                summary=message.summary,
                saved=message.saved,
                usage=message.usage,
                finished=message.finished,
                outputs=message.outputs,
                told=message.told,
            )
            what = "ended"
    return gw.stamped(agent, command, f"cmd-{launch_token}-{what}")


def _check_blocker(gw: AgentGateway, agent: AgentRecord, number: int) -> None:
    """Refused unless #``number`` is an open issue of the agent's repository, as GitHub has
    it now: an agent never sleeps on a number nothing will close."""
    try:
        reason = blocker_refused(gw.client(agent, TASK_READ_PERMISSIONS), number)
    except GitHubError as exc:
        raise LaunchRefusedError("github_refused", f"blocker #{number} could not be read: {exc}") from exc
    if reason is not None:
        raise LaunchRefusedError("forbidden", reason)


def _pushed(gw: AgentGateway, agent: AgentRecord, launch_token: str) -> EventEnvelope:
    """A dev agent pushed: its open pull request as GitHub has it now, for the router."""
    if agent.kind is not RoleKind.DEV or agent.pr_number is None or agent.installation_id is None:
        raise LaunchRefusedError("forbidden", f"{agent.agent_id} has no pull request of its own to update")
    client = gw.client(agent, TASK_READ_PERMISSIONS)
    try:
        pull = pull_request_fields(client.get_pull(agent.pr_number))
    except GitHubError as exc:
        raise LaunchRefusedError("github_refused", str(exc)) from exc
    if pull.head_ref != agent.branch:
        raise LaunchRefusedError("forbidden", f"PR #{pull.number} is not from {agent.branch}")
    return gw.stamped(
        agent, AgentPushedCommits(pull_request=pull), f"agent-{launch_token}-push-{pull.head_sha[:12]}"
    )


def _metrics(gw: AgentGateway, request: PublishMetrics) -> Answer:
    verified(gw, request, winding_down=True)
    points: list[MetricPoint] = []
    for given in request.points:
        spec = CATALOGUE.get(given.name)
        if spec is None or (spec.service != "agent" and not given.name.startswith("GitHub")):
            raise LaunchRefusedError("forbidden", f"{given.name} is not an agent task's metric")
        try:
            points.append(point(given.name, given.value, given.dimension))
        except ValueError as exc:
            raise LaunchRefusedError("invalid_request", str(exc)) from exc
    gw.agent_metrics.publish(points)
    return Answer(MetricsAnswer(published=len(points)))


#: The task's own operations: its lease, inbox, credentials, messages and metrics.
OPS: dict[str, Handler] = {
    "whoami": _whoami,
    "begin": _begin,
    "heartbeat": _heartbeat,
    "release": _release,
    "inbox": _inbox,
    "ack": _ack,
    "github_token": _github_token,
    "push_token": _push_token,
    "model_key": _model_key,
    "issue_spend": _issue_spend,
    "send": _send,
    "metrics": _metrics,
}
