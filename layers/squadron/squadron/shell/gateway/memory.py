"""Memory and artifacts: ``remember``, ``recall``, ``brief``, ``publish_artifact``, ``read_artifact``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from squadron.domain.agents import ConflictError, RoleKind
from squadron.domain.artifacts import (
    Artifact,
    ArtifactRefusedError,
    consumed,
    for_issue,
    listing,
    publish,
    shown,
)
from squadron.domain.context import shared_context
from squadron.domain.gateway_wire import (
    Brief,
    BriefAnswer,
    PublishArtifact,
    PublishArtifactAnswer,
    ReadArtifact,
    ReadArtifactAnswer,
    Recall,
    RecallAnswer,
    Remember,
    RememberAnswer,
)
from squadron.domain.launches import LaunchRefusedError, check_lease
from squadron.domain.memory import MemoryRefusedError, Reader, Writer, line
from squadron.domain.vouching import voucher, waits
from squadron.shell.conditional import read_change_put
from squadron.shell.gateway.protocol import Answer, Handler
from squadron.shell.gateway.secrets import refuse_secrets
from squadron.shell.gateway.verify import verified
from squadron.shell.memory import Memory

if TYPE_CHECKING:
    from squadron.shell.gateway.service import AgentGateway


def _memory(gw: AgentGateway) -> Memory:
    if gw.memory is None:
        raise LaunchRefusedError("forbidden", "this deployment keeps no memory")
    return gw.memory


def _remember(gw: AgentGateway, request: Remember) -> Answer:
    agent = verified(gw, request)
    check_lease(agent, request.launch_token, gw.clock())
    policy = gw.config_for(agent).config.memory
    writer = Writer(
        agent_id=agent.agent_id,
        role=agent.role,
        kind=agent.kind.value,
        repo_id=agent.repo_id,
        repo_full_name=agent.repo_full_name,
        issue_number=agent.issue_number,
    )
    refuse_secrets(gw, agent, "remember", [("fact", request.fact), ("evidence", request.evidence)])
    try:
        said = _memory(gw).remember(
            writer, text=request.fact, evidence=request.evidence, audience=request.audience, policy=policy
        )
    except MemoryRefusedError as exc:
        raise LaunchRefusedError("forbidden", str(exc)) from exc
    return Answer(RememberAnswer(remembered=said))


def _recall(gw: AgentGateway, request: Recall) -> Answer:
    agent = verified(gw, request)
    policy = gw.config_for(agent).config.memory
    if not policy.enabled:
        return Answer(RecallAnswer(facts=[]))
    reader = Reader(agent_id=agent.agent_id, kind=agent.kind.value)
    found = _memory(gw).recall(reader, agent.repo_id, request.query, policy=policy, limit=request.limit)
    return Answer(RecallAnswer(facts=[line(fact) for fact in found]))


def _brief(gw: AgentGateway, request: Brief) -> Answer:
    """The session's start: shared context (default branch only) and the memory it may see."""
    agent = verified(gw, request)
    config = gw.config_for(agent)
    reader = Reader(agent_id=agent.agent_id, kind=agent.kind.value)
    memory = (
        gw.memory.brief(reader, agent.repo_id, request.query, policy=config.config.memory)
        if gw.memory is not None
        else ""
    )
    made = (
        for_issue(gw.artifact_store.artifacts(agent.repo_id), agent.issue_number)
        if gw.artifact_store is not None
        else []
    )
    return Answer(
        BriefAnswer(
            context=shared_context(config.config.project, agent.repo_full_name, config.context),
            memory=memory,
            artifacts=listing(made),
        )
    )


def _publish_artifact(gw: AgentGateway, request: PublishArtifact) -> Answer:
    """An agent publishes (or revises) an artifact: the PM for any issue or the repository,
    any other agent for its own issue or pull request only."""
    agent = verified(gw, request)
    check_lease(agent, request.launch_token, gw.clock())
    if gw.artifact_store is None:
        raise LaunchRefusedError("forbidden", "this deployment keeps no artifacts")
    own = {n for n in (agent.issue_number, agent.pr_number) if n is not None}
    if agent.kind is not RoleKind.PM and request.issue_number not in own:
        mine = ", ".join(f"#{n}" for n in sorted(own)) or "none"
        raise LaunchRefusedError(
            "forbidden", f"{agent.display_name} publishes artifacts for its own issue only ({mine})"
        )
    if agent.kind is RoleKind.PM and request.issue_number is not None:
        # The PM reads strangers' issues: what it publishes reaches only vouched issues' briefs.
        triage = gw.config_for(agent).config.triage
        vouched_by = gw.registry.issue_view(agent.repo_id, request.issue_number).vouched_by
        if voucher(vouched_by, triage) is None:
            raise LaunchRefusedError("forbidden", f"not published: {waits(request.issue_number, triage)}")
    store = gw.artifact_store
    try:
        done = read_change_put(
            lambda: next(
                (
                    a
                    for a in store.artifacts(agent.repo_id)
                    if a.name == request.name and a.issue_number == request.issue_number
                ),
                None,
            ),
            lambda held: publish(
                held,
                repo_id=agent.repo_id,
                repo_full_name=agent.repo_full_name,
                name=request.name,
                issue_number=request.issue_number,
                content=request.content,
                producer=agent.agent_id,
                producer_role=agent.role,
                now=gw.clock(),
            ),
            lambda held, made: store.put_artifact(made, held.version if held is not None else None),
        )
    except ArtifactRefusedError as exc:
        raise LaunchRefusedError("forbidden", str(exc)) from exc
    except ConflictError:
        raise LaunchRefusedError("forbidden", f"artifact {request.name} keeps changing: try again") from None
    made = done.written
    assert made is not None  # publish always makes one (or refuses)
    return Answer(PublishArtifactAnswer(published=made.label, revision=made.revisions))


def _read_artifact(gw: AgentGateway, request: ReadArtifact) -> Answer:
    """An artifact of the agent's repository, its read recorded (the agent among its consumers)."""
    agent = verified(gw, request)
    if gw.artifact_store is None:
        raise LaunchRefusedError("forbidden", "this deployment keeps no artifacts")
    issue = request.issue_number if request.issue_number is not None else agent.issue_number
    store = gw.artifact_store

    def held() -> Artifact:
        found = [a for a in store.artifacts(agent.repo_id) if a.name == request.name]
        held = next((a for a in found if a.issue_number == issue), None) or next(
            (a for a in found if a.issue_number is None), None
        )
        if held is None:
            where = f" for #{issue}" if issue is not None else ""
            raise LaunchRefusedError("forbidden", f"no artifact {request.name}{where} in this repository")
        return held

    try:
        done = read_change_put(
            held,
            lambda held: consumed(held, agent.agent_id),
            lambda held, read: store.put_artifact(read, held.version),
        )
    except ConflictError:
        raise LaunchRefusedError("forbidden", f"artifact {request.name} keeps changing: try again") from None
    return Answer(ReadArtifactAnswer(artifact=shown(done.read)))


#: The repository's memory, the session's brief and the artifacts agents make for each other.
OPS: dict[str, Handler] = {
    "remember": _remember,
    "recall": _recall,
    "brief": _brief,
    "publish_artifact": _publish_artifact,
    "read_artifact": _read_artifact,
}
