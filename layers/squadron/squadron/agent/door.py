"""The agent host's side of the agent gateway: everything the task asks the framework.

The host holds its launch's secret (from its environment, read once) and presents it
on every call; nothing else in the task can (the Copilot CLI and the shell run as
another user, with an environment that never holds it). A refusal is raised as
:class:`~squadron.domain.launches.LaunchRefusedError` with the gateway's code. Requests and
answers are the wire's models (:mod:`squadron.domain.gateway_wire`): a request the gateway would
refuse as invalid is refused here already, an answer that is not what the operation answers is
the gateway failing (:class:`~squadron.adapters.gateway_client.GatewayUnavailableError`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypedDict, TypeVar

from pydantic import SecretStr, TypeAdapter, ValidationError

from squadron.adapters.gateway_client import GatewayUnavailableError
from squadron.domain.agents import AgentRecord, InboxItem
from squadron.domain.commands import TaskUsage
from squadron.domain.gateway_wire import (
    AckAnswer,
    AckInbox,
    Begin,
    BeginAnswer,
    Blocker,
    Brief,
    BriefAnswer,
    Ended,
    GitHubToken,
    GitHubWrite,
    GitHubWriteRequest,
    Heartbeat,
    HeartbeatAnswer,
    InboxAnswer,
    IssueSpend,
    IssueSpendAnswer,
    MetricsAnswer,
    ModelKey,
    ModelKeyAnswer,
    PointIn,
    ProposeChangeSet,
    ProposeChangeSetAnswer,
    PublishArtifact,
    PublishArtifactAnswer,
    PublishMetrics,
    PurgeClaim,
    PurgeClaimAnswer,
    Purged,
    PurgedAnswer,
    Pushed,
    PushToken,
    ReadArtifact,
    ReadArtifactAnswer,
    ReadInbox,
    Recall,
    RecallAnswer,
    Refusal,
    Release,
    ReleaseAnswer,
    Remember,
    RememberAnswer,
    Send,
    SendAnswer,
    TaskRequest,
    TokenAnswer,
    WhoAmI,
    WhoAmIAnswer,
    WireAnswer,
    WriteAnswer,
    refused_if_invalid,
)
from squadron.domain.launches import HANDOVER_PATIENCE, LaunchRefusedError
from squadron.domain.metrics import MetricPoint
from squadron.domain.usage import ModelTokens
from squadron.domain.writes import write_key

Transport = Callable[[dict[str, Any]], Mapping[str, Any]]

#: A vended GitHub token is used until this long before it expires, then asked for again.
TOKEN_REFRESH_MARGIN = timedelta(minutes=5)
#: How often a GitHub write is sent when the gateway cannot be heard (the same key each time).
WRITE_ATTEMPTS = 3
#: How long the task waits between two asks for a lease an earlier launch's task still holds.
HANDOVER_POLL_SECONDS = 5.0

A = TypeVar("A", bound=WireAnswer)
_WRITE = TypeAdapter[GitHubWriteRequest](GitHubWriteRequest)


class _Caller(TypedDict):
    """What every request carries: the task's agent, launch and secret."""

    agent_id: str
    launch_token: str
    secret: SecretStr


def _now() -> datetime:
    return datetime.now(UTC)


class Door:
    def __init__(
        self,
        transport: Transport,
        *,
        agent_id: str,
        launch_token: str,
        secret: str,
        clock: Callable[[], datetime] = _now,
        pause: Callable[[float], object] = time.sleep,
        patience: timedelta = HANDOVER_PATIENCE,
    ) -> None:
        self._transport = transport
        self.agent_id = agent_id
        self.launch_token = launch_token
        self._secret = secret
        self.clock = clock
        #: How the task waits before asking again for a lease another task holds (seconds).
        self.pause = pause
        #: How long :meth:`begin` waits for a lease another task holds.
        self.patience = patience
        self._tokens: dict[str, tuple[str, datetime]] = {}
        self._lock = threading.Lock()
        #: GitHub writes asked so far (each write's key counts them).
        self._writes = 0
        #: The App's login (``<slug>[bot]``), as the gateway knows it (learnt by :meth:`whoami`).
        self.bot_login: str | None = None

    def __repr__(self) -> str:  # never the secret
        return f"Door({self.agent_id}, launch {self.launch_token})"

    @property
    def caller(self) -> _Caller:
        """What every request carries (the secret in it: never log it)."""
        return {
            "agent_id": self.agent_id,
            "launch_token": self.launch_token,
            "secret": SecretStr(self._secret),
        }

    def call(self, build: Callable[[], TaskRequest], answer: type[A]) -> A:
        """Send the request ``build`` makes; the gateway's answer as ``answer`` (LaunchRefusedError:
        refused, here already when the request is not one the gateway takes)."""
        with refused_if_invalid():
            request = build()
        got = dict(self._transport(request.wire()))
        refusal = Refusal.read(got)
        if refusal is not None:
            raise refusal.error_of()
        try:
            return answer.model_validate(got)
        except ValidationError as exc:
            raise GatewayUnavailableError(
                f"the agent gateway answered {type(request).__name__} with no {answer.__name__}: {exc}"
            ) from exc

    # --- who the task is ---------------------------------------------------------------------

    def whoami(self) -> AgentRecord:
        """The agent's own record; the App's login is kept in :attr:`bot_login`."""
        answer = self.call(lambda: WhoAmI(**self.caller), WhoAmIAnswer)
        self.bot_login = answer.bot_login or None
        return answer.agent

    def begin(self) -> tuple[AgentRecord, int]:
        """Take the agent's lease (CREATED becomes ACTIVE): its record and its POSIX uid.

        While another task holds it (``lease_held``), ask again every
        :data:`HANDOVER_POLL_SECONDS` until it is free, for :attr:`patience` at most
        (:data:`~squadron.domain.launches.HANDOVER_PATIENCE`).
        That task is one of an earlier launch (this launch is the agent's latest, or the gateway
        refuses it as replaced), which may still save its work and then releases the lease; it
        cannot renew it any more, so the lease is free within its TTL, released or expired
        (docs/exactly-once.md, "Task launches"). Nothing is done before the lease is this task's.
        """
        deadline: datetime | None = None
        while True:
            try:
                answer = self.call(lambda: Begin(**self.caller), BeginAnswer)
            except LaunchRefusedError as exc:
                now = self.clock()
                deadline = deadline or now + self.patience
                if exc.code != "lease_held" or now >= deadline:
                    raise
                self.pause(HANDOVER_POLL_SECONDS)
                continue
            return answer.agent, answer.uid

    def heartbeat(self) -> str:
        """Renew the lease; the agent's status (LaunchRefusedError ``lease_lost`` once it is gone)."""
        return self.call(lambda: Heartbeat(**self.caller), HeartbeatAnswer).status

    def release(self) -> None:
        self.call(lambda: Release(**self.caller), ReleaseAnswer)

    # --- its inbox ---------------------------------------------------------------------------

    def pending_inbox(self, agent_id: str | None = None) -> list[InboxItem]:
        """The inbox's first page (the gateway hands at most INBOX_PAGE_ITEMS at once)."""
        return self.inbox_page()[0]

    def inbox_page(self) -> tuple[list[InboxItem], int]:
        """The inbox's first page, oldest first, and how many items wait after it."""
        answer = self.call(lambda: ReadInbox(**self.caller), InboxAnswer)
        return answer.items, answer.more

    def inbox_news(self) -> tuple[list[InboxItem], list[str]]:
        """The inbox's first page and the keys of all its items, oldest first (up to MAX_TOLD):
        what news waits, past the page the model reads first too."""
        answer = self.call(lambda: ReadInbox(**self.caller), InboxAnswer)
        return answer.items, answer.keys or [item.key for item in answer.items]

    def ack_inbox(self, agent_id: str | None, items: list[InboxItem]) -> None:
        if items:
            self.call(lambda: AckInbox(**self.caller, items=items), AckAnswer)

    # --- credentials ---------------------------------------------------------------------------

    def github_token(self) -> str:
        """A read-only installation token for the agent's repository (reused until near expiry)."""
        return self._cached_token(GitHubToken)

    def push_token(self) -> str:
        """A dev agent's token to push its branch (contents only), for the framework's own clone."""
        return self._cached_token(PushToken)

    def _cached_token(self, kind: type[GitHubToken | PushToken]) -> str:
        with self._lock:
            cached = self._tokens.get(kind.__name__)
            if cached is not None and cached[1] - self.clock() > TOKEN_REFRESH_MARGIN:
                return cached[0]
            answer = self.call(lambda: kind(**self.caller), TokenAnswer)
            self._tokens[kind.__name__] = (answer.token, answer.expires_at)
            return answer.token

    def github(self, write: GitHubWriteRequest | Mapping[str, Any]) -> Any:
        """Have the gateway carry out a GitHub write for the agent (as its role); GitHub's answer.

        Each write has its own key (:mod:`squadron.domain.writes`): when the gateway cannot be
        heard (the invocation failed in transit, perhaps after the write was done), the same
        request is sent again, up to :data:`WRITE_ATTEMPTS` times, and the gateway answers it
        with what the first did instead of writing twice. ``write`` as a mapping is read as the
        wire's write it names (refused when it names none).
        """
        with self._lock:
            self._writes += 1
            key = write_key(self.launch_token, self._writes)
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                return self.call(
                    lambda: GitHubWrite(**self.caller, write=_WRITE.validate_python(write), key=key),
                    WriteAnswer,
                ).result
            except GatewayUnavailableError:
                if attempt == WRITE_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def model_key(self) -> tuple[Literal["byok", "copilot", "none"], str | None]:
        """The provider key the agent's role names: BYOK, the Copilot token, or none configured."""
        answer = self.call(lambda: ModelKey(**self.caller), ModelKeyAnswer)
        return answer.kind, answer.key

    def issue_spend(self, tokens: tuple[ModelTokens, ...], active_seconds: int) -> IssueSpendAnswer:
        """Report what this task has spent so far; what the issue's other agents have spent."""
        return self.call(
            lambda: IssueSpend(**self.caller, tokens=tokens, active_seconds=active_seconds),
            IssueSpendAnswer,
        )

    # --- memory and context ------------------------------------------------------------------

    def remember(self, fact: str, evidence: str, audience: str = "repository") -> str:
        """Propose a fact to the repository's memory; what the memory said."""
        return self.call(
            lambda: Remember(**self.caller, fact=fact, evidence=evidence, audience=audience),
            RememberAnswer,
        ).remembered

    def recall(self, query: str, limit: int = 10) -> list[str]:
        """The facts the agent may see that match ``query``, one line each."""
        return self.call(lambda: Recall(**self.caller, query=query[:500], limit=limit), RecallAnswer).facts

    def brief(self, query: str) -> tuple[str, str, str]:
        """(shared context, memory, artifacts) the session starts with ("" for any there is none of)."""
        answer = self.call(lambda: Brief(**self.caller, query=query[:500]), BriefAnswer)
        return answer.context, answer.memory, answer.artifacts

    def publish_artifact(self, name: str, content: str, issue_number: int | None) -> str:
        answer = self.call(
            lambda: PublishArtifact(**self.caller, name=name, content=content, issue_number=issue_number),
            PublishArtifactAnswer,
        )
        return f"Published {answer.published} (revision {answer.revision})."

    def propose_change_set(
        self, issue: int, repositories: list[str], dependencies: list[tuple[str, str]], plan: str
    ) -> ProposeChangeSetAnswer:
        """Propose a change set on ``issue`` of the agent's repository (the gateway refuses it
        to any role but the PM's); the set as the gateway stored it."""
        return self.call(
            lambda: ProposeChangeSet(
                **self.caller,
                issue_number=issue,
                repositories=repositories,
                dependencies=dependencies,
                plan=plan,
            ),
            ProposeChangeSetAnswer,
        )

    def read_artifact(self, name: str, issue_number: int | None) -> str:
        return self.call(
            lambda: ReadArtifact(**self.caller, name=name, issue_number=issue_number), ReadArtifactAnswer
        ).artifact

    # --- what it tells the router ------------------------------------------------------------

    def pushed(self) -> str:
        """Tell the router the agent pushed its branch (the gateway reads its PR from GitHub)."""
        return self.call(lambda: Send(**self.caller, message=Pushed()), SendAnswer).delivery_id

    def register_blocker(self, issue: int, blocker: int, *, sleep: bool, note: str, what: str) -> str:
        return self.call(
            lambda: Send(
                **self.caller,
                message=Blocker(
                    issue_number=issue, blocker_number=blocker, sleep=sleep, note=note, what=what
                ),
            ),
            SendAnswer,
        ).delivery_id

    def task_ended(
        self,
        outcome: Literal["idle", "sleeping", "escalated", "failed"],
        *,
        usage: TaskUsage,
        reason: str = "",
        summary: str = "",
        saved: str = "",
        finished: bool = True,
        outputs: dict[str, str] | None = None,
        told: list[str] | None = None,
    ) -> str:
        return self.call(
            lambda: Send(
                **self.caller,
                message=Ended(
                    outcome=outcome,
                    reason=reason[:4_000],
                    summary=summary[:8_000],
                    saved=saved[:2_000],
                    usage=usage,
                    finished=finished,
                    outputs=dict(outputs or {}),
                    told=list(told or []),
                ),
            ),
            SendAnswer,
        ).delivery_id

    # --- the janitor (squadron.agent.janitor) -------------------------------------------------

    def purge_claim(self) -> list[str]:
        """Finished agents past the retention, claimed for this task to remove their state (ids)."""
        return self.call(lambda: PurgeClaim(**self.caller), PurgeClaimAnswer).agents

    def purged(self, agent_ids: Iterable[str]) -> list[str]:
        """Report the claimed agents whose directories are gone; those recorded purged."""
        agents = list(agent_ids)
        return self.call(lambda: Purged(**self.caller, agents=agents), PurgedAnswer).purged

    def publish(self, points: Iterable[MetricPoint]) -> None:
        given = [(p.name, p.value, p.dimension[1] if p.dimension else None) for p in points]
        for start in range(0, len(given), 50):
            page = given[start : start + 50]
            self.call(
                lambda: PublishMetrics(
                    **self.caller,
                    points=[PointIn(name=name, value=value, dimension=dim) for name, value, dim in page],  # noqa: B023
                ),
                MetricsAnswer,
            )
