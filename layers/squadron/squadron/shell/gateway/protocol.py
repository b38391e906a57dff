"""The agent gateway's wire: the requests a task sends, the answers it gets, and how both are
parsed and logged."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr, ValidationError

from squadron.domain.agents import AgentRecord, InboxItem, RegistryError, parse_agent_id
from squadron.domain.artifacts import MAX_ARTIFACT_CHARS
from squadron.domain.artifacts import NAME_PATTERN as ARTIFACT_NAME
from squadron.domain.events import IssueNumber, TaskUsage
from squadron.domain.launches import LaunchRefusedError
from squadron.domain.memory import MAX_EVIDENCE_CHARS, MAX_QUERY_CHARS, MAX_RECALLED, Audience
from squadron.domain.retention import PURGE_PAGE
from squadron.domain.writes import KEY_PATTERN as WRITE_KEY_PATTERN

if TYPE_CHECKING:
    from squadron.shell.gateway.service import AgentGateway


#: A dedup key an agent names its message with: short and plain (it ends up in a delivery id).
_WHAT = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$"


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


def parse_request(event: Any) -> Request:
    """The request, or LaunchRefusedError("invalid_request") naming the first problem."""
    try:
        return _Envelope.model_validate({"request": event}).request
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or "request"
        raise LaunchRefusedError("invalid_request", f"invalid request: {where}: {first['msg']}") from exc


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


Handler = Callable[["AgentGateway", Any], Answer]
"""One operation: the gateway and its parsed request in, the answer out (refused: LaunchRefusedError)."""


def sanitized(event: Any) -> dict[str, Any]:
    """A request as it may be logged: the secret replaced."""
    if not isinstance(event, dict):
        return {"request": type(event).__name__}
    shown = {k: v for k, v in event.items() if k not in ("secret", "message", "points", "items")}
    return {**shown, "secret": "***" if "secret" in event else None}
