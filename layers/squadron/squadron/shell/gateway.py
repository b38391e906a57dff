"""The agent gateway: the one narrow door between an agent task and the framework.

An agent task's AWS role may invoke this function and nothing else that matters:
it holds no rights on the registry, the events queue, Secrets Manager or
CloudWatch. Every call carries the agent id, the launch token and the launch's
secret (:mod:`squadron.domain.launches`); the gateway verifies them first and
then acts only on that agent's own things:

=================  ==============================================================
op                 what the verified task gets
=================  ==============================================================
``whoami``         its own record and the App's login (what the task needs to set itself up)
``begin``          its lease, its record (CREATED becomes ACTIVE), its own POSIX uid
``heartbeat``      its lease renewed (refused once another task holds it)
``release``        its lease given up (also while winding down)
``inbox``/``ack``  its own inbox items
``github_token``   a read-only installation token for its repository (issues, pull
                   requests, code): what the task reads GitHub and fetches with
``push_token``     a dev agent's token to push its branch (contents only), used by the
                   framework's own clone, never in the agent's directory
``github``         a write the task asks for (a comment, an issue, its pull request, a
                   review, its status, labels, the App's assignment), checked against the
                   role table with the caller built from the agent's record and carried out
                   here, with a token narrowed to the role: the task holds no write token for it.
                   What the router must hear of (the App's own webhooks are dropped at the
                   ingress) is put on events.fifo here as a typed command built from
                   GitHub's answer (:data:`REPORTED`), never from the task's words
``model_key``      the provider key its own role's configuration names (BYOK, or the
                   Copilot token), nothing else
``send``           an envelope on events.fifo: a command about itself (a blocker, how its
                   task ended, that it pushed its branch — its PR is then read from
                   GitHub), checked against its role; the repository,
                   installation, sender and the command's agent are stamped here from
                   the verified record, never taken from the task
``metrics``        its task's metric points published (catalogue names only)
``remember``       a fact proposed to its repository's memory (seen only by itself until a
                   person confirms it: :mod:`squadron.domain.memory`)
``recall``         the facts of its repository's memory it may see that match a query
``brief``          what its session starts with: the repository's shared context
                   (``.squadron/context.md`` and the project section, from the default branch),
                   the most relevant facts it may see, and the artifacts made for its issue
``publish_artifact`` an artifact it produces (the PM: for any issue; others: their own)
``read_artifact``  an artifact of its repository, its read recorded among the consumers
``purge_claim``    the janitor's page (at most PURGE_PAGE) of finished agents whose state is
                   past the retention, each claimed for it (:mod:`squadron.domain.retention`):
                   their ids and nothing else. Any kind of agent's task, once it holds its
                   own lease (its host is root on the shared volume, where the ids are the
                   directories' names anyway)
``purged``         the agents it claimed and whose directories are gone, recorded purged
                   (once; an agent restarted meanwhile only loses the claim)
=================  ==============================================================

A refusal is ``{"error", "code"}`` with a code from
:data:`squadron.domain.launches.REFUSAL_CODES`, counted by the handler.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal, Protocol, assert_never

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr, ValidationError

from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.client import GitHubClient
from squadron.adapters.github.errors import GitHubError, NotFoundError
from squadron.adapters.github.keyed import once
from squadron.adapters.secret_scan import find_secrets
from squadron.config.parse import SquadronConfig
from squadron.domain import lifecycle
from squadron.domain.agents import (
    TERMINAL,
    AgentRecord,
    AgentStatus,
    ConflictError,
    InboxItem,
    RegistryError,
    RoleKind,
    inbox_page,
    parse_agent_id,
)
from squadron.domain.artifacts import (
    MAX_ARTIFACT_CHARS,
    ArtifactRefusedError,
    consumed,
    for_issue,
    listing,
    publish,
    shown,
)
from squadron.domain.artifacts import NAME_PATTERN as ARTIFACT_NAME
from squadron.domain.context import shared_context
from squadron.domain.effects import AgentWrite, marked
from squadron.domain.events import (
    Actor,
    AgentAction,
    AgentAssignedIssue,
    AgentOpenedIssue,
    AgentOpenedPullRequest,
    AgentPostedStatus,
    AgentPushedCommits,
    AgentSubmittedReview,
    EnvelopeError,
    EventEnvelope,
    IssueNumber,
    RegisterBlocker,
    SquadronCommand,
    TaskEnded,
    TaskUsage,
    command_envelope,
    issue_fields,
    pull_request_fields,
    review_fields,
    status_fields,
)
from squadron.domain.launches import LaunchRefusedError, check_lease, verify_launch
from squadron.domain.markers import inert
from squadron.domain.memory import (
    MAX_EVIDENCE_CHARS,
    MAX_QUERY_CHARS,
    MAX_RECALLED,
    Audience,
    MemoryRefusedError,
    Reader,
    Writer,
    line,
    pr_section,
)
from squadron.domain.metrics import CATALOGUE, MetricPoint, point
from squadron.domain.permissions import (
    INSTALLATION_PERMISSIONS,
    PUSH_PERMISSIONS,
    TASK_READ_PERMISSIONS,
    Action,
    PermissionDeniedError,
    agent_caller,
    caller_kind,
    check,
)
from squadron.domain.repo_config.constants import BYOK_SECRET_PREFIX
from squadron.domain.repo_config.models import ByokProvider
from squadron.domain.retention import (
    DEFAULT_RETENTION_DAYS,
    PURGE_PAGE,
    PURGE_WINDOW,
    claim,
    purge_due,
    purge_owner,
    purged,
)
from squadron.domain.retrospective import ROLE as RETRO_ROLE
from squadron.domain.retrospective import ActionItem
from squadron.domain.routing.snapshot import IssueView
from squadron.domain.threats import Finding, refusal, withheld_words, write_texts
from squadron.domain.vouching import voucher, waits
from squadron.domain.write_policy import (
    approves,
    assignees_refusal,
    base_refusal,
    blocker_refusal,
    bound_commit,
    labels_refusal,
    subject_refusal,
)
from squadron.domain.writes import KEY_PATTERN as WRITE_KEY_PATTERN
from squadron.domain.writes import WriteClaim, belongs_to
from squadron.ports import ArtifactStore, EventQueue, MetricsSink, RetroStore, SecretSource
from squadron.shell.memory import Memory

logger = logging.getLogger(__name__)

#: How long a lease lasts without a heartbeat (the host beats every heartbeat_interval).
LEASE_TTL = timedelta(minutes=15)
#: A dedup key an agent names its message with: short and plain (it ends up in a delivery id).
_WHAT = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$"

#: What each kind of agent does on GitHub that the router must hear of (the App's own webhooks
#: are dropped at the ingress): the gateway reports it from GitHub's answer to the write.
_REVIEW_STATES = {"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED"}
REPORTED: dict[RoleKind, frozenset[str]] = {
    RoleKind.PM: frozenset({"agent_assigned_issue"}),
    RoleKind.DEV: frozenset({"agent_opened_issue", "agent_opened_pull_request", "agent_pushed_commits"}),
    RoleKind.REVIEW: frozenset({"agent_submitted_review", "agent_posted_status"}),
}


def _now() -> datetime:
    return datetime.now(UTC)


# --- requests ---------------------------------------------------------------------------------


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    agent_id: str = Field(min_length=1, max_length=200)
    launch_token: str = Field(min_length=1, max_length=64)
    secret: SecretStr = Field(min_length=16, max_length=256)


class WhoAmI(_Request):
    op: Literal["whoami"]


class Begin(_Request):
    op: Literal["begin"]


class Heartbeat(_Request):
    op: Literal["heartbeat"]


class Release(_Request):
    op: Literal["release"]


class ReadInbox(_Request):
    op: Literal["inbox"]


class AckInbox(_Request):
    op: Literal["ack"]
    items: list[InboxItem] = Field(max_length=200)


class GitHubToken(_Request):
    op: Literal["github_token"]


class ModelKey(_Request):
    op: Literal["model_key"]


class PushToken(_Request):
    op: Literal["push_token"]


_Body = Field(min_length=1, max_length=65_536)


class WriteComment(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    action: Literal["comment"] = "comment"
    number: int = Field(gt=0)
    body: str = _Body


class WriteIssue(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    action: Literal["create_issue"] = "create_issue"
    title: str = Field(min_length=1, max_length=256)
    body: str = _Body
    labels: list[str] = Field(default_factory=list, max_length=10)


class WritePull(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    action: Literal["create_pull"] = "create_pull"
    title: str = Field(min_length=1, max_length=256)
    head: str = Field(min_length=1, max_length=255)
    base: str = Field(min_length=1, max_length=255)
    body: str = _Body
    draft: bool = False


class WriteReview(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    action: Literal["create_review"] = "create_review"
    number: int = Field(gt=0)
    event: Literal["APPROVE", "REQUEST_CHANGES", "COMMENT"]
    body: str = _Body
    commit_id: str | None = Field(default=None, pattern=r"^[0-9a-f]{40}$")
    #: The verdict a review posted as a comment means: GitHub does not let the App approve or
    #: request changes on its own pull request, so the agent comments and says what it decided.
    verdict: Literal["APPROVE", "REQUEST_CHANGES"] | None = None


class WriteStatus(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    action: Literal["create_status"] = "create_status"
    sha: str = Field(pattern=r"^[0-9a-f]{40}$")
    state: Literal["error", "failure", "pending", "success"]
    context: str = Field(min_length=1, max_length=100)
    description: str = Field(default="", max_length=140)


class WriteLabels(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    action: Literal["add_labels"] = "add_labels"
    number: int = Field(gt=0)
    labels: list[str] = Field(min_length=1, max_length=10)


class WriteAssignees(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    action: Literal["add_assignees"] = "add_assignees"
    number: int = Field(gt=0)
    assignees: list[str] = Field(min_length=1, max_length=10)


GitHubWriteRequest = Annotated[
    WriteComment | WriteIssue | WritePull | WriteReview | WriteStatus | WriteLabels | WriteAssignees,
    Field(discriminator="action"),
]


class GitHubWrite(_Request):
    op: Literal["github"]
    write: GitHubWriteRequest
    #: The write's key (:func:`squadron.domain.writes.write_key`): a request sent again with the
    #: same key is answered with what the first did, never carried out twice.
    key: str | None = Field(default=None, pattern=WRITE_KEY_PATTERN)


class Pushed(BaseModel):
    """A dev agent pushed its branch (with its push token): the gateway reads its PR from GitHub."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["pushed"] = "pushed"


class Blocker(BaseModel):
    """``issue_number`` waits for ``blocker_number`` (``sleep``: the sending agent sleeps on it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["register_blocker"] = "register_blocker"
    issue_number: IssueNumber
    blocker_number: IssueNumber
    sleep: bool = False
    note: str = Field(default="", max_length=2_000)
    what: str = Field(pattern=_WHAT)


class Ended(BaseModel):
    """How the task ended (see :class:`~squadron.domain.events.TaskEnded`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["task_ended"] = "task_ended"
    outcome: Literal["idle", "sleeping", "escalated", "failed"]
    reason: str = Field(default="", max_length=4_000)
    summary: str = Field(default="", max_length=8_000)
    saved: str = Field(default="", max_length=2_000)
    usage: TaskUsage = Field(default_factory=TaskUsage)
    finished: bool = True


AgentMessage = Annotated[Pushed | Blocker | Ended, Field(discriminator="kind")]


class Send(_Request):
    op: Literal["send"]
    message: AgentMessage


class PointIn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(max_length=64)
    value: float = Field(ge=0, le=1e9)
    dimension: str | None = Field(default=None, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")


class PublishMetrics(_Request):
    op: Literal["metrics"]
    points: list[PointIn] = Field(max_length=50)


class Remember(_Request):
    op: Literal["remember"]
    fact: str = Field(min_length=1, max_length=2_000)
    evidence: str = Field(min_length=1, max_length=MAX_EVIDENCE_CHARS)
    audience: Audience = "repository"


class Recall(_Request):
    op: Literal["recall"]
    query: str = Field(default="", max_length=MAX_QUERY_CHARS)
    limit: int = Field(default=MAX_RECALLED, ge=1, le=MAX_RECALLED)


class Brief(_Request):
    op: Literal["brief"]
    query: str = Field(default="", max_length=MAX_QUERY_CHARS)


class PublishArtifact(_Request):
    op: Literal["publish_artifact"]
    name: str = Field(pattern=ARTIFACT_NAME)
    content: str = Field(min_length=1, max_length=MAX_ARTIFACT_CHARS)
    issue_number: int | None = Field(default=None, gt=0)


class ReadArtifact(_Request):
    op: Literal["read_artifact"]
    name: str = Field(pattern=ARTIFACT_NAME)
    issue_number: int | None = Field(default=None, gt=0)


def _agent_id(value: str) -> str:
    try:
        parse_agent_id(value)
    except RegistryError as exc:
        raise ValueError(str(exc)) from None
    return value


AgentId = Annotated[str, Field(max_length=200), AfterValidator(_agent_id)]


class PurgeClaim(_Request):
    op: Literal["purge_claim"]


class Purged(_Request):
    op: Literal["purged"]
    agents: list[AgentId] = Field(max_length=PURGE_PAGE)


GatewayRequest = Annotated[
    WhoAmI
    | Begin
    | Heartbeat
    | Release
    | ReadInbox
    | AckInbox
    | GitHubToken
    | PushToken
    | GitHubWrite
    | ModelKey
    | Send
    | PublishMetrics
    | Remember
    | Recall
    | Brief
    | PublishArtifact
    | ReadArtifact
    | PurgeClaim
    | Purged,
    Field(discriminator="op"),
]


class _Envelope(BaseModel):
    request: GatewayRequest


Request = (
    WhoAmI
    | Begin
    | Heartbeat
    | Release
    | ReadInbox
    | AckInbox
    | GitHubToken
    | PushToken
    | GitHubWrite
    | ModelKey
    | Send
    | PublishMetrics
    | Remember
    | Recall
    | Brief
    | PublishArtifact
    | ReadArtifact
    | PurgeClaim
    | Purged
)


def inert_write(write: GitHubWriteRequest) -> GitHubWriteRequest:
    """``write`` with the agent's words (bodies, titles, a status's description) made unable to
    carry a framework marker (:func:`squadron.domain.markers.inert`) before they are posted."""
    fields = {
        name: inert(value)
        for name in ("title", "body", "description")
        if isinstance(value := getattr(write, name, None), str)
    }
    return write.model_copy(update=fields)


def parse_request(event: Any) -> Request:
    """The request, or LaunchRefusedError("invalid_request") naming the first problem."""
    try:
        return _Envelope.model_validate({"request": event}).request
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or "request"
        raise LaunchRefusedError("invalid_request", f"invalid request: {where}: {first['msg']}") from exc


# --- ports --------------------------------------------------------------------------------------


class GatewayRegistry(Protocol):
    def get_agent(self, agent_id: str) -> AgentRecord | None: ...
    def put_agent(self, write: AgentWrite) -> None: ...
    def acquire_lease(self, agent_id: str, owner: str, now: datetime, ttl: timedelta) -> AgentRecord: ...
    def release_lease(self, agent_id: str, owner: str, now: datetime) -> None: ...
    def pending_inbox(self, agent_id: str) -> list[InboxItem]: ...
    def ack_inbox(self, agent_id: str, items: list[InboxItem]) -> None: ...
    def claim_uid(self, agent_id: str, at: datetime) -> int: ...
    def finished_agents(self, before: datetime, limit: int) -> list[AgentRecord]: ...
    def claim_write(self, agent_id: str, key: str, now: datetime) -> WriteClaim | None: ...
    def record_write(self, agent_id: str, key: str, result: Any) -> None: ...
    def issue_view(self, repo_id: int, number: int) -> IssueView: ...


@dataclass(frozen=True)
class Answer:
    """What the gateway answers (JSON-able); ``secret`` marks answers never to be logged."""

    body: dict[str, Any]
    secret: bool = False


@dataclass(frozen=True)
class Served:
    """One call, answered: the body for the caller, and what the handler logs and counts."""

    body: dict[str, Any]
    op: str
    agent_id: str | None = None
    launch_token: str | None = None
    #: The refusal's code (None: answered).
    refused: str | None = None
    #: The body holds a secret (a token, a key): never logged.
    secret: bool = False


def public_record(agent: AgentRecord) -> dict[str, Any]:
    """The agent's record as its task may see it (without the launch secret's hash)."""
    return agent.model_dump(mode="json", exclude={"launch_secret_hash"})


# --- the service --------------------------------------------------------------------------------


class AgentGateway:
    def __init__(
        self,
        *,
        registry: GatewayRegistry,
        app: GitHubApp,
        queue: EventQueue,
        secrets: SecretSource,
        config_for: Callable[[AgentRecord], SquadronConfig],
        agent_metrics: MetricsSink,
        bot_login: str = "squadron[bot]",
        copilot_token_secret: str | None = None,
        memory: Memory | None = None,
        retros: RetroStore | None = None,
        artifacts: ArtifactStore | None = None,
        state_retention: timedelta = timedelta(days=DEFAULT_RETENTION_DAYS),
        clock: Callable[[], datetime] = _now,
        scan: Callable[[list[tuple[str, str]]], list[Finding]] = find_secrets,
    ) -> None:
        #: Finds secrets in what an agent asks the App to write (kinds and places only).
        self.scan = scan
        #: The repositories' memory (None: a deployment without one refuses remember).
        self.memory = memory
        #: The repositories' retrospectives: what a retrospective's agent opens is tracked there.
        self.retros = retros
        #: What agents produce for each other (a plan), with producer and consumers.
        self.artifact_store = artifacts
        self.registry = registry
        self.app = app
        self.queue = queue
        self.secrets = secrets
        self.config_for = config_for
        self.agent_metrics = agent_metrics
        self.bot_login = bot_login
        self.copilot_token_secret = copilot_token_secret
        #: How long a finished agent's working copy and session are kept on the shared volume.
        self.state_retention = state_retention
        self.clock = clock

    def serve(self, event: Any) -> Served:
        """Parse, verify and answer one invocation; a refusal is an answer too (never raised)."""
        op = str(event.get("op"))[:32] if isinstance(event, dict) else "?"
        request: Request | None = None
        try:
            request = parse_request(event)
            answer = self.handle(request)
        except LaunchRefusedError as exc:
            return Served(
                {"error": str(exc), "code": exc.code},
                op,
                request.agent_id if request else None,
                request.launch_token if request else None,
                refused=exc.code,
            )
        return Served(answer.body, request.op, request.agent_id, request.launch_token, secret=answer.secret)

    def handle(self, request: Request) -> Answer:
        """Verify the caller, then do what it asked; LaunchRefusedError when refused."""
        match request:
            case WhoAmI():
                agent = self._verified(request)
                return Answer({"agent": public_record(agent), "bot_login": self.bot_login})
            case Begin():
                return self._begin(request)
            case Heartbeat():
                return self._heartbeat(request)
            case Release():
                self._verified(request, winding_down=True)
                self.registry.release_lease(request.agent_id, request.launch_token, self.clock())
                return Answer({"released": True})
            case ReadInbox():
                self._verified(request)
                page, more = inbox_page(self.registry.pending_inbox(request.agent_id))
                return Answer({"items": [item.model_dump(mode="json") for item in page], "more": more})
            case AckInbox():
                return self._ack(request)
            case GitHubToken():
                return self._token(request, TASK_READ_PERMISSIONS)
            case PushToken():
                agent = self._verified(request)
                if agent.kind is not RoleKind.DEV or not agent.branch:
                    raise LaunchRefusedError(
                        "forbidden", f"{agent.agent_id} has no branch of its own to push"
                    )
                return self._token(request, PUSH_PERMISSIONS)
            case GitHubWrite():
                return self._github_write(request)
            case ModelKey():
                return self._model_key(request)
            case Send():
                return self._send(request)
            case PublishMetrics():
                return self._metrics(request)
            case Remember():
                return self._remember(request)
            case Recall():
                return self._recall(request)
            case Brief():
                return self._brief(request)
            case PublishArtifact():
                return self._publish_artifact(request)
            case ReadArtifact():
                return self._read_artifact(request)
            case PurgeClaim():
                return self._purge_claim(request)
            case Purged():
                return self._purged(request)
            case _:
                assert_never(request)

    # --- memory and context -------------------------------------------------------------------

    def _memory(self) -> Memory:
        if self.memory is None:
            raise LaunchRefusedError("forbidden", "this deployment keeps no memory")
        return self.memory

    def _remember(self, request: Remember) -> Answer:
        agent = self._verified(request)
        check_lease(agent, request.launch_token, self.clock())
        policy = self.config_for(agent).config.memory
        writer = Writer(
            agent_id=agent.agent_id,
            role=agent.role,
            kind=agent.kind.value,
            repo_id=agent.repo_id,
            repo_full_name=agent.repo_full_name,
            issue_number=agent.issue_number,
        )
        self._refuse_secrets(agent, "remember", [("fact", request.fact), ("evidence", request.evidence)])
        try:
            said = self._memory().remember(
                writer, text=request.fact, evidence=request.evidence, audience=request.audience, policy=policy
            )
        except MemoryRefusedError as exc:
            raise LaunchRefusedError("forbidden", str(exc)) from exc
        return Answer({"remembered": said})

    def _recall(self, request: Recall) -> Answer:
        agent = self._verified(request)
        policy = self.config_for(agent).config.memory
        if not policy.enabled:
            return Answer({"facts": []})
        reader = Reader(agent_id=agent.agent_id, kind=agent.kind.value)
        found = self._memory().recall(
            reader, agent.repo_id, request.query, policy=policy, limit=request.limit
        )
        return Answer({"facts": [line(fact) for fact in found]})

    def _brief(self, request: Brief) -> Answer:
        """The session's start: shared context (default branch only) and the memory it may see."""
        agent = self._verified(request)
        config = self.config_for(agent)
        reader = Reader(agent_id=agent.agent_id, kind=agent.kind.value)
        memory = (
            self.memory.brief(reader, agent.repo_id, request.query, policy=config.config.memory)
            if self.memory is not None
            else ""
        )
        made = (
            for_issue(self.artifact_store.artifacts(agent.repo_id), agent.issue_number)
            if self.artifact_store is not None
            else []
        )
        return Answer(
            {
                "context": shared_context(config.config.project, agent.repo_full_name, config.context),
                "memory": memory,
                "artifacts": listing(made),
            }
        )

    def _publish_artifact(self, request: PublishArtifact) -> Answer:
        """An agent publishes (or revises) an artifact: the PM for any issue or the repository,
        any other agent for its own issue or pull request only."""
        agent = self._verified(request)
        check_lease(agent, request.launch_token, self.clock())
        if self.artifact_store is None:
            raise LaunchRefusedError("forbidden", "this deployment keeps no artifacts")
        own = {n for n in (agent.issue_number, agent.pr_number) if n is not None}
        if agent.kind is not RoleKind.PM and request.issue_number not in own:
            mine = ", ".join(f"#{n}" for n in sorted(own)) or "none"
            raise LaunchRefusedError(
                "forbidden", f"{agent.display_name} publishes artifacts for its own issue only ({mine})"
            )
        if agent.kind is RoleKind.PM and request.issue_number is not None:
            # The PM reads strangers' issues: what it publishes reaches only vouched issues' briefs.
            triage = self.config_for(agent).config.triage
            vouched_by = self.registry.issue_view(agent.repo_id, request.issue_number).vouched_by
            if voucher(vouched_by, triage) is None:
                raise LaunchRefusedError("forbidden", f"not published: {waits(request.issue_number, triage)}")
        for _attempt in range(3):
            held = next(
                (
                    a
                    for a in self.artifact_store.artifacts(agent.repo_id)
                    if a.name == request.name and a.issue_number == request.issue_number
                ),
                None,
            )
            try:
                made = publish(
                    held,
                    repo_id=agent.repo_id,
                    repo_full_name=agent.repo_full_name,
                    name=request.name,
                    issue_number=request.issue_number,
                    content=request.content,
                    producer=agent.agent_id,
                    producer_role=agent.role,
                    now=self.clock(),
                )
            except ArtifactRefusedError as exc:
                raise LaunchRefusedError("forbidden", str(exc)) from exc
            try:
                self.artifact_store.put_artifact(made, held.version if held is not None else None)
            except ConflictError:
                continue
            return Answer({"published": made.label, "revision": made.revisions})
        raise LaunchRefusedError("forbidden", f"artifact {request.name} keeps changing: try again")

    def _read_artifact(self, request: ReadArtifact) -> Answer:
        """An artifact of the agent's repository, its read recorded (the agent among its consumers)."""
        agent = self._verified(request)
        if self.artifact_store is None:
            raise LaunchRefusedError("forbidden", "this deployment keeps no artifacts")
        issue = request.issue_number if request.issue_number is not None else agent.issue_number
        for _attempt in range(3):
            found = [a for a in self.artifact_store.artifacts(agent.repo_id) if a.name == request.name]
            held = next((a for a in found if a.issue_number == issue), None) or next(
                (a for a in found if a.issue_number is None), None
            )
            if held is None:
                where = f" for #{issue}" if issue is not None else ""
                raise LaunchRefusedError("forbidden", f"no artifact {request.name}{where} in this repository")
            try:
                self.artifact_store.put_artifact(consumed(held, agent.agent_id), held.version)
            except ConflictError:
                continue
            return Answer({"artifact": shown(held)})
        raise LaunchRefusedError("forbidden", f"artifact {request.name} keeps changing: try again")

    # --- verification ----------------------------------------------------------------------

    def _verified(self, request: _Request, *, winding_down: bool = False) -> AgentRecord:
        return verify_launch(
            self.registry.get_agent(request.agent_id),
            agent_id=request.agent_id,
            launch_token=request.launch_token,
            secret=request.secret.get_secret_value(),
            now=self.clock(),
            winding_down=winding_down,
        )

    # --- ops ---------------------------------------------------------------------------------

    def _begin(self, request: Begin) -> Answer:
        agent = self._verified(request)
        now = self.clock()
        check_lease(agent, request.launch_token, now)
        try:
            agent = self.registry.acquire_lease(agent.agent_id, request.launch_token, now, LEASE_TTL)
        except ConflictError as exc:
            raise LaunchRefusedError("lease_held", f"the lease of {agent.agent_id} is held: {exc}") from exc
        # A first task moves its agent to ACTIVE (the lifecycle's begin), on the version just read;
        # a router's write in between is read again and decided again.
        for _ in range(3):
            begun = lifecycle.begin(agent, now=now)
            if begun is None:
                break
            try:
                self.registry.put_agent(AgentWrite(begun, agent.version))
                agent = begun
            except ConflictError:
                reread = self.registry.get_agent(agent.agent_id)
                if reread is None:
                    raise LaunchRefusedError("unknown_agent", f"{agent.agent_id} vanished") from None
                agent = reread
        uid = self.registry.claim_uid(agent.agent_id, now)
        agent = self.registry.get_agent(agent.agent_id) or agent
        return Answer({"agent": public_record(agent), "uid": uid})

    def _heartbeat(self, request: Heartbeat) -> Answer:
        agent = self._verified(request, winding_down=True)
        if agent.status not in (AgentStatus.ACTIVE, AgentStatus.CREATED):
            return Answer({"status": agent.status.value})  # the task winds down; nothing to renew
        try:
            renewed = self.registry.acquire_lease(
                agent.agent_id, request.launch_token, self.clock(), LEASE_TTL
            )
        except ConflictError as exc:
            raise LaunchRefusedError(
                "lease_lost", f"the lease of {agent.agent_id} is another task's"
            ) from exc
        return Answer({"status": renewed.status.value})

    def _ack(self, request: AckInbox) -> Answer:
        agent = self._verified(request)
        foreign = [item for item in request.items if item.agent_id != agent.agent_id]
        if foreign:
            raise LaunchRefusedError("forbidden", f"{agent.agent_id} may acknowledge only its own inbox")
        self.registry.ack_inbox(agent.agent_id, list(request.items))
        return Answer({"acknowledged": len(request.items)})

    def _token(self, request: GitHubToken | PushToken, permissions: Mapping[str, str]) -> Answer:
        """An installation token for the agent's repository with ``permissions`` (never its role's)."""
        agent = self._verified(request)
        check_lease(agent, request.launch_token, self.clock())
        if agent.installation_id is None:
            raise LaunchRefusedError("forbidden", f"agent {agent.agent_id} has no installation")
        token = self.app.installation_token(
            agent.installation_id, repositories=(agent.repo_full_name,), permissions=permissions
        )
        return Answer(
            {
                "token": token.token,
                "expires_at": token.expires_at.isoformat(),
                "repository": agent.repo_full_name,
                "permissions": dict(permissions),
            },
            secret=True,
        )

    def _github_write(self, request: GitHubWrite) -> Answer:
        """Carry out a write the task asked for, as the agent's role, with the role's narrowed token.

        The caller (kind, name, role, branch) comes from the agent's record, never from the task;
        the role table decides (GitHubClient checks it before every call), and the subjects a role
        may write on are checked here: its own issue or pull request, its own pull request's head.
        """
        agent = self._verified(request)
        check_lease(agent, request.launch_token, self.clock())
        if agent.installation_id is None:
            raise LaunchRefusedError("forbidden", f"agent {agent.agent_id} has no installation")
        self._no_secrets(agent, request.write)
        client = self._client(agent, INSTALLATION_PERMISSIONS[caller_kind(agent.kind)])
        write = inert_write(request.write)  # no framework marker in what the App posts for it
        key = request.key
        repeated = self._repeated_write(agent, request, client, key) if key is not None else None
        if repeated is not None:
            return repeated
        pull: dict[str, Any] | None = None  # the agent's PR, when the write read it (its report reuses it)
        try:
            write = self._policed(agent, client, write)
            result: Any
            match write:
                case WriteComment():
                    result = self._once(
                        client, write, key, lambda: client.comment(write.number, _keyed(write.body, key))
                    )
                case WriteIssue():
                    result = self._once(
                        client,
                        write,
                        key,
                        lambda: client.create_issue(
                            write.title, _keyed(write.body, key), labels=write.labels
                        ),
                    )
                case WritePull():
                    body = _keyed(self._with_proposals(agent, write.body), key)
                    result = self._once(
                        client,
                        write,
                        key,
                        lambda: client.create_pull(
                            title=write.title, head=write.head, base=write.base, body=body, draft=write.draft
                        ),
                    )
                case WriteReview():
                    result = self._once(
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
                    pull = self._own_head(agent, client, write.sha)
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
                action = self._action_of(agent, write, result, client, pull)
            except ValidationError as exc:  # GitHub answered something no webhook would carry
                raise LaunchRefusedError(
                    "github_refused", f"done, but GitHub's answer could not be reported to the router: {exc}"
                ) from exc
        except PermissionDeniedError as exc:
            raise LaunchRefusedError("forbidden", str(exc)) from exc
        except GitHubError as exc:
            raise LaunchRefusedError("github_refused", str(exc)) from exc
        return self._written_by(agent, request, result, action)

    def _once(
        self, client: GitHubClient, write: GitHubWriteRequest, key: str | None, send: Callable[[], Any]
    ) -> Any:
        """``send`` a write that creates something; when GitHub may have applied it without
        saying so, what it created is looked up by the write's key before it is sent again
        (:func:`~squadron.adapters.github.keyed.once`). Without a key nothing can be looked up:
        GitHub's silence is the task's to hear."""
        if key is None:
            return send()
        since = self.clock() - WRITE_LOOKBACK
        return once(send, lambda: _written(client, write, key, self.bot_login, since))

    def _written_by(
        self, agent: AgentRecord, request: GitHubWrite, result: Any, action: AgentAction | None
    ) -> Answer:
        """A write carried out: the router told, the answer kept under the write's key, a
        retrospective's action item tracked; GitHub's answer for the task."""
        if action is not None:
            self._report(agent, request.launch_token, action)
        if request.key is not None:
            self.registry.record_write(agent.agent_id, request.key, result)
        write = request.write
        if (
            agent.role == RETRO_ROLE
            and isinstance(write, WriteIssue | WritePull)
            and isinstance(result, dict)
        ):
            self._track(agent, write, result)
        return Answer({"result": result})

    def _repeated_write(
        self, agent: AgentRecord, request: GitHubWrite, client: GitHubClient, key: str
    ) -> Answer | None:
        """The answer to a write whose key was claimed before (None: a first request, carry it out).

        The kept answer if the first request recorded one; else what the first created, found on
        GitHub by its marker (and reported to the router, under the id GitHub's answer fixes, in
        case the first died before it could); None when nothing is there (it never got that far).
        """
        if not belongs_to(key, request.launch_token):
            raise LaunchRefusedError("forbidden", f"write key {key} is not of this task's launch")
        claim = self.registry.claim_write(agent.agent_id, key, self.clock())
        if claim is None:
            return None
        if claim.result is not None:
            return Answer({"result": claim.result, "repeated": True})
        since = claim.claimed_at - WRITE_LOOKBACK
        write = request.write
        try:
            found = _written(client, write, key, self.bot_login, since)
            if found is None:
                return None
            action = self._action_of(agent, write, found, client, None)
        except (GitHubError, ValidationError) as exc:
            raise LaunchRefusedError(
                "github_refused", f"write {key} was asked before and could not be looked up: {exc}"
            ) from exc
        answer = self._written_by(agent, request, found, action)
        return Answer({**answer.body, "repeated": True})

    def _track(self, agent: AgentRecord, write: WriteIssue | WritePull, result: dict[str, Any]) -> None:
        """A retrospective's agent opened an action item (an issue) or its pull request: tracked
        on its retrospective, so the next one reports what became of it."""
        number = result.get("number")
        if self.retros is None or agent.issue_number is None or not isinstance(number, int):
            return
        kind: Literal["issue", "pull_request"] = "pull_request" if isinstance(write, WritePull) else "issue"
        item = ActionItem(text=write.title[:500], kind=kind, number=number)
        for _attempt in range(3):
            held = next(
                (
                    r
                    for r in self.retros.retrospectives(agent.repo_id)
                    if r.issue_number == agent.issue_number
                ),
                None,
            )
            if held is None:
                return  # not a retrospective's issue (a role named so by hand): nothing to track
            tracked = held.with_item(item)
            if tracked == held:
                return
            try:
                self.retros.put_retrospective(tracked, held.version)
                return
            except ConflictError:
                continue
        logger.warning(
            "%s: action item #%s not tracked: its retrospective kept changing", agent.agent_id, number
        )

    def _with_proposals(self, agent: AgentRecord, body: str) -> str:
        """``body`` with the agent's facts awaiting confirmation listed (a person's merge confirms
        them): whoever merges reads what they confirm."""
        if self.memory is None:
            return body
        policy = self.config_for(agent).config.memory
        section = pr_section(self.memory.proposals(agent.repo_id, agent.agent_id, policy=policy))
        return f"{body}\n\n{section}" if section else body

    def _no_secrets(self, agent: AgentRecord, write: GitHubWriteRequest) -> None:
        """Refused (``secret_found``, counted) when the agent's words in ``write`` carry a secret:
        the agent hears its kind and place, never its value, and nothing reaches GitHub."""
        texts = [(name, getattr(write, name, None)) for name in ("title", "body", "description")]
        self._refuse_secrets(agent, write.action, texts)

    def _refuse_secrets(
        self, agent: AgentRecord, action: str, texts: Iterable[tuple[str, str | None]]
    ) -> None:
        """Refused (``secret_found``, counted) when one of the named ``texts`` carries a secret."""
        findings = self.scan(write_texts(texts))
        if findings:
            logger.warning(
                "%s: %s refused, secrets found: %s",
                agent.agent_id,
                action,
                ", ".join(f.said() for f in findings),
            )
            raise LaunchRefusedError("secret_found", f"not written: {refusal(findings)}")

    def _ended_unleaked(self, agent: AgentRecord, message: Ended) -> Ended:
        """How the task ended, its words withheld where they carry a secret (the router posts the
        summary and the reason when it hands the issue to humans): the task is escalated, the
        humans told the kind and place of what was found, never its value."""
        fields = {"reason": message.reason, "summary": message.summary, "saved": message.saved}
        findings = self.scan(write_texts(fields.items()))
        if not findings:
            return message
        logger.warning(
            "%s: its task's last words withheld, secrets found: %s",
            agent.agent_id,
            ", ".join(f.said() for f in findings),
        )
        leaked = {f.field for f in findings}
        kept = {name: "" if name in leaked else text for name, text in fields.items()}
        reason = withheld_words(findings)
        if kept["reason"]:
            reason = f"{kept['reason']}; {reason}"
        return message.model_copy(update={**kept, "reason": reason[:4_000], "outcome": "escalated"})

    def _policed(
        self, agent: AgentRecord, client: GitHubClient, write: GitHubWriteRequest
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
                    self.config_for(agent).config.labels,
                    role=agent.role,
                    opening=isinstance(write, WriteIssue),
                )
            case WritePull() if reason is None:
                check(caller, Action.OPEN_PR, branch=write.head)  # its own branch, then where to
                flows = self.config_for(agent).approval_flows
                default = str(client.get_repository().get("default_branch") or "")
                reason = base_refusal(write.base, write.head, default_branch=default, flows=flows)
            case WriteReview() if reason is None and approves(write.event, write.verdict):
                head = str((client.get_pull(write.number).get("head") or {}).get("sha") or "")
                commit, reason = bound_commit(write.number, write.event, write.verdict, write.commit_id, head)
                write = write.model_copy(update={"commit_id": commit})
            case WriteAssignees() if reason is None:
                check(caller, Action.ASSIGN)  # the role first, then whom
                reason = assignees_refusal(write.assignees, self.bot_login)
            case _:
                pass
        if reason is not None:
            raise LaunchRefusedError("forbidden", reason)
        return write

    @staticmethod
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
        self,
        agent: AgentRecord,
        write: GitHubWriteRequest,
        result: Any,
        client: GitHubClient,
        pull_read: dict[str, Any] | None,
    ) -> AgentAction | None:
        """What the router must hear of ``write``, built from GitHub's answer ``result`` (or None)."""
        answer = result if isinstance(result, dict) else {}
        bot_login = self.bot_login
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

    def _report(self, agent: AgentRecord, launch_token: str, action: AgentAction) -> None:
        """Put ``action`` on events.fifo for the router, under an id GitHub's answer fixes."""
        subject = {
            AgentOpenedIssue: lambda a: f"issue-{a.issue.number}",
            AgentAssignedIssue: lambda a: f"assign-{a.issue.number}",
            AgentOpenedPullRequest: lambda a: f"pr-{a.pull_request.number}",
            AgentPushedCommits: lambda a: f"push-{a.pull_request.head_sha[:12]}",
            AgentSubmittedReview: lambda a: f"review-{a.review.id}",
            AgentPostedStatus: lambda a: f"status-{a.status.sha[:12]}-{a.status.state}",
        }[type(action)](action)
        envelope = self._stamped(agent, action, f"agent-{launch_token}-{subject}")
        try:
            envelope.to_message()
        except EnvelopeError as exc:
            raise LaunchRefusedError("invalid_request", str(exc)) from exc
        self.queue.send(envelope)

    def _stamped(self, agent: AgentRecord, command: SquadronCommand, delivery_id: str) -> EventEnvelope:
        """``command`` as the envelope of ``agent``'s task: its repository, installation and id
        stamped from the verified record, the App as sender, the agent as verified source."""
        return command_envelope(
            command,
            repository={"id": agent.repo_id, "full_name": agent.repo_full_name, "default_branch": None},
            installation_id=agent.installation_id,
            delivery_id=delivery_id,
            now=self.clock(),
            origin="agent",
        ).model_copy(
            update={"source_agent": agent.agent_id, "sender": Actor(login=self.bot_login, id=0, type="Bot")}
        )

    def _model_key(self, request: ModelKey) -> Answer:
        agent = self._verified(request)
        check_lease(agent, request.launch_token, self.clock())
        provider = self.config_for(agent).role(agent.role).provider
        if isinstance(provider, ByokProvider):
            secret_id = provider.api_key_secret
            # The configuration was validated already; this is the door, so check again.
            if not secret_id.split(":secret:", 1)[-1].startswith(BYOK_SECRET_PREFIX):
                raise LaunchRefusedError("forbidden", f"{secret_id} is not under {BYOK_SECRET_PREFIX}")
            return Answer({"kind": "byok", "key": self.secrets.get(secret_id)}, secret=True)
        if self.copilot_token_secret is None:
            return Answer({"kind": "none"})
        return Answer({"kind": "copilot", "key": self.secrets.get(self.copilot_token_secret)}, secret=True)

    def _send(self, request: Send) -> Answer:
        message = request.message
        agent = self._verified(request, winding_down=isinstance(message, Ended))
        if isinstance(message, Ended):
            message = self._ended_unleaked(agent, message)  # the router posts its words
        envelope = self.envelope(agent, request.launch_token, message)
        if isinstance(message, Blocker):
            self._refuse_secrets(agent, "register_blocker", [("note", message.note)])  # the router posts it
            self._check_blocker(agent, message.blocker_number)
        try:
            envelope.to_message()  # within the queue's size, or refused (never a crash of the send)
        except EnvelopeError as exc:
            raise LaunchRefusedError("invalid_request", str(exc)) from exc
        message_id = self.queue.send(envelope)
        return Answer({"message_id": message_id, "delivery_id": envelope.delivery_id})

    def envelope(
        self, agent: AgentRecord, launch_token: str, message: Pushed | Blocker | Ended
    ) -> EventEnvelope:
        """The envelope ``agent``'s task may put on events.fifo for ``message``, or refused."""
        match message:
            case Pushed():
                return self._pushed(agent, launch_token)
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
                )
                what = "ended"
        return self._stamped(agent, command, f"cmd-{launch_token}-{what}")

    def _check_blocker(self, agent: AgentRecord, number: int) -> None:
        """Refused unless #``number`` is an open issue of the agent's repository, as GitHub has
        it now: an agent never sleeps on a number nothing will close."""
        client = self._client(agent, TASK_READ_PERMISSIONS)
        try:
            issue: dict[str, Any] | None = client.get_issue(number)
        except NotFoundError:
            issue = None
        except GitHubError as exc:
            raise LaunchRefusedError("github_refused", f"blocker #{number} could not be read: {exc}") from exc
        reason = blocker_refusal(number, issue)
        if reason is not None:
            raise LaunchRefusedError("forbidden", reason)

    def _client(self, agent: AgentRecord, permissions: Mapping[str, str]) -> GitHubClient:
        """GitHub as ``agent``'s role (the caller from its record), with a token narrowed to ``permissions``."""
        installation, repo = agent.installation_id, agent.repo_full_name
        if installation is None:
            raise LaunchRefusedError("forbidden", f"agent {agent.agent_id} has no installation")
        chosen = dict(permissions)
        return GitHubClient(
            http=self.app.http,
            token=lambda: (
                self.app.installation_token(installation, repositories=(repo,), permissions=chosen).token
            ),
            installation_id=installation,
            repo=repo,
            caller=agent_caller(agent),
        )

    def _pushed(self, agent: AgentRecord, launch_token: str) -> EventEnvelope:
        """A dev agent pushed: its open pull request as GitHub has it now, for the router."""
        if agent.kind is not RoleKind.DEV or agent.pr_number is None or agent.installation_id is None:
            raise LaunchRefusedError(
                "forbidden", f"{agent.agent_id} has no pull request of its own to update"
            )
        client = self._client(agent, TASK_READ_PERMISSIONS)
        try:
            pull = pull_request_fields(client.get_pull(agent.pr_number))
        except GitHubError as exc:
            raise LaunchRefusedError("github_refused", str(exc)) from exc
        if pull.head_ref != agent.branch:
            raise LaunchRefusedError("forbidden", f"PR #{pull.number} is not from {agent.branch}")
        return self._stamped(
            agent, AgentPushedCommits(pull_request=pull), f"agent-{launch_token}-push-{pull.head_sha[:12]}"
        )

    def _metrics(self, request: PublishMetrics) -> Answer:
        self._verified(request, winding_down=True)
        points: list[MetricPoint] = []
        for given in request.points:
            spec = CATALOGUE.get(given.name)
            if spec is None or (spec.service != "agent" and not given.name.startswith("GitHub")):
                raise LaunchRefusedError("forbidden", f"{given.name} is not an agent task's metric")
            try:
                points.append(point(given.name, given.value, given.dimension))
            except ValueError as exc:
                raise LaunchRefusedError("invalid_request", str(exc)) from exc
        self.agent_metrics.publish(points)
        return Answer({"published": len(points)})

    def _purge_claim(self, request: PurgeClaim) -> Answer:
        """Claim the janitor's page of finished agents past the retention; their ids only."""
        agent = self._verified(request)
        now = self.clock()
        if agent.lease_owner != request.launch_token or not agent.lease_is_live(now):
            raise LaunchRefusedError(
                "forbidden", f"{agent.agent_id}'s task sweeps once it holds its own lease (begin first)"
            )
        owner = purge_owner(request.launch_token)
        claimed: list[str] = []
        for candidate in self.registry.finished_agents(now - self.state_retention, PURGE_WINDOW):
            if len(claimed) == PURGE_PAGE:
                break
            # A task mounts only its own repository's root: another's state is not there to remove.
            if candidate.repo_id != agent.repo_id:
                continue
            if not purge_due(candidate, now=now, retention=self.state_retention):
                continue
            try:  # on the version read: a restart or another janitor since then wins
                self.registry.put_agent(AgentWrite(claim(candidate, owner, now), candidate.version))
            except ConflictError:
                continue
            claimed.append(candidate.agent_id)
        if claimed:
            logger.info("%s claims the state of %s for removal", agent.agent_id, ", ".join(claimed))
        return Answer({"agents": claimed})

    def _purged(self, request: Purged) -> Answer:
        """Record ``purged_at`` on the agents this task claimed (each once); an agent restarted
        since its claim only loses the claim (its new generation starts from nothing)."""
        self._verified(request, winding_down=True)
        owner = purge_owner(request.launch_token)
        recorded: list[str] = []
        for agent_id in dict.fromkeys(request.agents):
            for _ in range(3):
                now = self.clock()
                current = self.registry.get_agent(agent_id)
                if current is None or current.lease_owner != owner:
                    break  # not this task's claim (never, or lapsed and taken since): nothing to record
                if current.status not in TERMINAL:
                    self.registry.release_lease(agent_id, owner, now)
                    break
                try:
                    self.registry.put_agent(AgentWrite(purged(current, now), current.version))
                except ConflictError:
                    continue  # changed under the claim (a restart keeps it): read it again
                recorded.append(agent_id)
                break
        return Answer({"purged": recorded})


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


def sanitized(event: Any) -> dict[str, Any]:
    """A request as it may be logged: the secret replaced."""
    if not isinstance(event, dict):
        return {"request": type(event).__name__}
    shown = {k: v for k, v in event.items() if k not in ("secret", "message", "points", "items")}
    return {**shown, "secret": "***" if "secret" in event else None}
