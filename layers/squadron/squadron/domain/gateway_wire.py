"""The typed wire between an agent task and the agent gateway (:mod:`squadron.shell.gateway`).

Every request a task may send and every answer it gets back, as models both sides import: the
task's door (:mod:`squadron.agent.door`) builds and sends the requests and reads the answers, the
gateway parses the requests (:data:`GatewayRequest`, discriminated by ``op``) and answers with
the answer models, or with a :class:`Refusal`. Pure: no I/O, only the models and how they go
on the wire (:meth:`TaskRequest.wire`, :meth:`WireAnswer.wire`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_serializer,
)

from squadron.domain.agents import AgentRecord, InboxItem, RegistryError, parse_agent_id
from squadron.domain.artifacts import MAX_ARTIFACT_CHARS
from squadron.domain.artifacts import NAME_PATTERN as ARTIFACT_NAME
from squadron.domain.change_sets import MAX_REPOSITORIES
from squadron.domain.commands import MAX_OUTPUTS, MAX_TOLD, InboxKey, OutputKey, OutputValue, TaskUsage
from squadron.domain.event_fields import IssueNumber
from squadron.domain.launches import REFUSAL_CODES, LaunchRefusedError, RefusalCode
from squadron.domain.memory import MAX_EVIDENCE_CHARS, MAX_QUERY_CHARS, MAX_RECALLED, Audience
from squadron.domain.retention import PURGE_PAGE
from squadron.domain.usage import MAX_MODELS, ModelTokens
from squadron.domain.writes import KEY_PATTERN as WRITE_KEY_PATTERN

#: A dedup key an agent names its message with: short and plain (it ends up in a delivery id).
_WHAT = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$"


# --- requests ---------------------------------------------------------------------------------


class TaskRequest(BaseModel):
    """What every request carries: who asks, under which launch, with the launch's secret."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent_id: str = Field(min_length=1, max_length=200)
    launch_token: str = Field(min_length=1, max_length=64)
    secret: SecretStr = Field(min_length=16, max_length=256)

    def wire(self) -> dict[str, Any]:
        """The JSON object the task sends (the secret's value in it: never log it)."""
        return {**self.model_dump(mode="json"), "secret": self.secret.get_secret_value()}


class WhoAmI(TaskRequest):
    op: Literal["whoami"] = "whoami"


class Begin(TaskRequest):
    op: Literal["begin"] = "begin"


class Heartbeat(TaskRequest):
    op: Literal["heartbeat"] = "heartbeat"


class Release(TaskRequest):
    op: Literal["release"] = "release"


class ReadInbox(TaskRequest):
    op: Literal["inbox"] = "inbox"


class AckInbox(TaskRequest):
    op: Literal["ack"] = "ack"
    items: list[InboxItem] = Field(max_length=200)


class GitHubToken(TaskRequest):
    op: Literal["github_token"] = "github_token"


class ModelKey(TaskRequest):
    op: Literal["model_key"] = "model_key"


class PushToken(TaskRequest):
    op: Literal["push_token"] = "push_token"


class IssueSpend(TaskRequest):
    """What this task has spent so far (kept for the issue's other agents to count), and what the
    issue's other agents have spent (asked by the task's model gateway before each model call)."""

    op: Literal["issue_spend"] = "issue_spend"
    tokens: tuple[ModelTokens, ...] = Field(default=(), max_length=MAX_MODELS)
    active_seconds: int = Field(default=0, ge=0, le=7 * 24 * 3600)


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


class GitHubWrite(TaskRequest):
    op: Literal["github"] = "github"
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
    """How the task ended (see :class:`~squadron.domain.commands.TaskEnded`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["task_ended"] = "task_ended"
    outcome: Literal["idle", "sleeping", "escalated", "failed"]
    reason: str = Field(default="", max_length=4_000)
    summary: str = Field(default="", max_length=8_000)
    saved: str = Field(default="", max_length=2_000)
    usage: TaskUsage = Field(default_factory=TaskUsage)
    finished: bool = True
    #: What report_complete said the work produced (:attr:`TaskEnded.outputs`).
    outputs: dict[OutputKey, OutputValue] = Field(default_factory=dict, max_length=MAX_OUTPUTS)
    #: The inbox items its model was told of (:attr:`TaskEnded.told`).
    told: list[InboxKey] = Field(default_factory=list, max_length=MAX_TOLD)


AgentMessage = Annotated[Pushed | Blocker | Ended, Field(discriminator="kind")]


class Send(TaskRequest):
    op: Literal["send"] = "send"
    message: AgentMessage


class PointIn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(max_length=64)
    value: float = Field(ge=0, le=1e9)
    dimension: str | None = Field(default=None, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")


class PublishMetrics(TaskRequest):
    op: Literal["metrics"] = "metrics"
    points: list[PointIn] = Field(max_length=50)


class Remember(TaskRequest):
    op: Literal["remember"] = "remember"
    fact: str = Field(min_length=1, max_length=2_000)
    evidence: str = Field(min_length=1, max_length=MAX_EVIDENCE_CHARS)
    audience: Audience = "repository"


class Recall(TaskRequest):
    op: Literal["recall"] = "recall"
    query: str = Field(default="", max_length=MAX_QUERY_CHARS)
    limit: int = Field(default=MAX_RECALLED, ge=1, le=MAX_RECALLED)


class Brief(TaskRequest):
    op: Literal["brief"] = "brief"
    query: str = Field(default="", max_length=MAX_QUERY_CHARS)


class PublishArtifact(TaskRequest):
    op: Literal["publish_artifact"] = "publish_artifact"
    name: str = Field(pattern=ARTIFACT_NAME)
    content: str = Field(min_length=1, max_length=MAX_ARTIFACT_CHARS)
    issue_number: int | None = Field(default=None, gt=0)


class ReadArtifact(TaskRequest):
    op: Literal["read_artifact"] = "read_artifact"
    name: str = Field(pattern=ARTIFACT_NAME)
    issue_number: int | None = Field(default=None, gt=0)


#: A repository's full name as a change set names it (the desk checks it against the installation).
_Repository = Annotated[str, Field(min_length=3, max_length=140)]


class ProposeChangeSet(TaskRequest):
    """The PM proposes a change set on ``issue_number`` of its own repository (docs/change-sets.md):
    the origin and its installation are the agent's, never the request's."""

    op: Literal["propose_change_set"] = "propose_change_set"
    issue_number: IssueNumber
    #: The other repositories (the origin is added).
    repositories: list[_Repository] = Field(min_length=1, max_length=MAX_REPOSITORIES - 1)
    #: (a, b): ``a`` needs ``b`` (``b`` merges first).
    dependencies: list[tuple[_Repository, _Repository]] = Field(default_factory=list, max_length=45)
    plan: str = Field(min_length=1, max_length=MAX_ARTIFACT_CHARS)


def _agent_id(value: str) -> str:
    try:
        parse_agent_id(value)
    except RegistryError as exc:
        raise ValueError(str(exc)) from None
    return value


AgentId = Annotated[str, Field(max_length=200), AfterValidator(_agent_id)]


class PurgeClaim(TaskRequest):
    op: Literal["purge_claim"] = "purge_claim"


class Purged(TaskRequest):
    op: Literal["purged"] = "purged"
    agents: list[AgentId] = Field(max_length=PURGE_PAGE)


#: Every request a task may send.
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
    | IssueSpend
    | Send
    | PublishMetrics
    | Remember
    | Recall
    | Brief
    | PublishArtifact
    | ReadArtifact
    | ProposeChangeSet
    | PurgeClaim
    | Purged
)

#: A request as the gateway parses it: which one, by its ``op``.
GatewayRequest = Annotated[Request, Field(discriminator="op")]


# --- answers --------------------------------------------------------------------------------------


class WireAnswer(BaseModel):
    """An answer of the gateway. A field with a default is left off the wire at its default (it
    is there only when it says something: a write ``repeated``, a provider ``key``)."""

    model_config = ConfigDict(frozen=True)

    def wire(self) -> dict[str, Any]:
        """The JSON object the gateway answers."""
        return self.model_dump(mode="json", exclude_defaults=True)


class _WithRecord(WireAnswer):
    agent: AgentRecord

    @field_serializer("agent")
    def _public(self, agent: AgentRecord) -> dict[str, Any]:
        """The agent's record as its task may see it: never a launch secret's hash (the launch
        it replaced is left out whole)."""
        return agent.model_dump(mode="json", exclude={"launch_secret_hash", "replaced_launch"})


class WhoAmIAnswer(_WithRecord):
    bot_login: str


class BeginAnswer(_WithRecord):
    uid: int


class HeartbeatAnswer(WireAnswer):
    status: str


class ReleaseAnswer(WireAnswer):
    released: bool


class InboxAnswer(WireAnswer):
    items: list[InboxItem]
    #: How many items wait after this page.
    more: int
    #: The keys of the inbox's items, this page's and those after it, oldest first, up to
    #: :data:`~squadron.domain.commands.MAX_TOLD` (:func:`~squadron.domain.agents.inbox_keys`):
    #: what the host tells its model of, whichever page the model reads.
    keys: list[InboxKey] = Field(default_factory=list, max_length=MAX_TOLD)


class AckAnswer(WireAnswer):
    acknowledged: int


class TokenAnswer(WireAnswer):
    """An installation token (``github_token``, ``push_token``): a secret answer."""

    token: str
    expires_at: datetime
    repository: str
    permissions: dict[str, str]

    @field_serializer("expires_at")
    def _iso(self, at: datetime) -> str:
        return at.isoformat()


class WriteAnswer(WireAnswer):
    #: GitHub's answer to the write.
    result: Any
    #: The write's key was asked before: this is what the first request did.
    repeated: bool = False


class ModelKeyAnswer(WireAnswer):
    kind: Literal["byok", "copilot", "none"]
    key: str | None = None


class IssueSpendAnswer(WireAnswer):
    """What the issue's other agents have cost (recorded, and their running tasks' last reports),
    priced by the repository's table (:func:`squadron.domain.issue_budget.issue_spend`)."""

    others_usd: float = Field(ge=0)
    #: The issue the agent's cost counts for (None: it counts for none, the PM's).
    issue: int | None = None


class SendAnswer(WireAnswer):
    message_id: str
    delivery_id: str


class MetricsAnswer(WireAnswer):
    published: int


class RememberAnswer(WireAnswer):
    #: What the memory said (for the model).
    remembered: str


class RecallAnswer(WireAnswer):
    facts: list[str]


class BriefAnswer(WireAnswer):
    context: str
    memory: str
    artifacts: str


class PublishArtifactAnswer(WireAnswer):
    published: str
    revision: int


class ReadArtifactAnswer(WireAnswer):
    artifact: str


class ProposeChangeSetAnswer(WireAnswer):
    set_id: str
    state: str
    repositories: list[str]
    merge_order: list[str]
    #: Where the plan is kept (the artifact's label).
    plan: str
    #: The exact command a writer of each repository comments on the origin issue.
    approve_with: str


class PurgeClaimAnswer(WireAnswer):
    agents: list[str]


class PurgedAnswer(WireAnswer):
    purged: list[str]


class Refusal(WireAnswer):
    """A refused request: why, and a code from :data:`squadron.domain.launches.REFUSAL_CODES`."""

    error: str
    code: RefusalCode

    @classmethod
    def of(cls, exc: LaunchRefusedError) -> Refusal:
        return cls(error=str(exc), code=exc.code)

    @classmethod
    def read(cls, answer: dict[str, Any]) -> Refusal | None:
        """The refusal ``answer`` is (None: it is none); an unknown code reads ``invalid_request``."""
        if "error" not in answer:
            return None
        code = str(answer.get("code") or "invalid_request")
        return cls(error=str(answer["error"]), code=code if code in REFUSAL_CODES else "invalid_request")

    def error_of(self) -> LaunchRefusedError:
        return LaunchRefusedError(self.code, self.error)


#: Each operation's answer, by the request's ``op``.
ANSWERS: dict[str, type[WireAnswer]] = {
    "whoami": WhoAmIAnswer,
    "begin": BeginAnswer,
    "heartbeat": HeartbeatAnswer,
    "release": ReleaseAnswer,
    "inbox": InboxAnswer,
    "ack": AckAnswer,
    "github_token": TokenAnswer,
    "push_token": TokenAnswer,
    "github": WriteAnswer,
    "model_key": ModelKeyAnswer,
    "issue_spend": IssueSpendAnswer,
    "send": SendAnswer,
    "metrics": MetricsAnswer,
    "remember": RememberAnswer,
    "recall": RecallAnswer,
    "brief": BriefAnswer,
    "publish_artifact": PublishArtifactAnswer,
    "read_artifact": ReadArtifactAnswer,
    "propose_change_set": ProposeChangeSetAnswer,
    "purge_claim": PurgeClaimAnswer,
    "purged": PurgedAnswer,
}


def problem(exc: ValidationError, *, skip: int = 0) -> str:
    """The first problem ``exc`` found, as a refusal says it (``skip``: leading parts of the
    place that are not the caller's, such as a union's tag)."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"][skip:]) or "request"
    return f"invalid request: {where}: {first['msg']}"


@contextmanager
def refused_if_invalid() -> Iterator[None]:
    """Building a request the gateway would refuse raises that refusal (``invalid_request``)
    on the task's side already, as the gateway would have said it."""
    try:
        yield
    except ValidationError as exc:
        raise LaunchRefusedError("invalid_request", problem(exc)) from exc
