"""The agent host's side of the agent gateway: everything the task asks the framework.

The host holds its launch's secret (from its environment, read once) and presents it
on every call; nothing else in the task can (the Copilot CLI and the shell run as
another user, with an environment that never holds it). A refusal is raised as
:class:`~squadron.domain.launches.LaunchRefusedError` with the gateway's code.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, cast

from squadron.adapters.gateway_client import GatewayUnavailableError
from squadron.domain.agents import AgentRecord, InboxItem
from squadron.domain.events import TaskUsage
from squadron.domain.launches import REFUSAL_CODES, LaunchRefusedError, RefusalCode
from squadron.domain.metrics import MetricPoint
from squadron.domain.writes import write_key

Transport = Callable[[dict[str, Any]], Mapping[str, Any]]

#: A vended GitHub token is used until this long before it expires, then asked for again.
TOKEN_REFRESH_MARGIN = timedelta(minutes=5)
#: How often a GitHub write is sent when the gateway cannot be heard (the same key each time).
WRITE_ATTEMPTS = 3


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
    ) -> None:
        self._transport = transport
        self.agent_id = agent_id
        self.launch_token = launch_token
        self._secret = secret
        self.clock = clock
        self._tokens: dict[str, tuple[str, datetime]] = {}
        self._lock = threading.Lock()
        #: GitHub writes asked so far (each write's key counts them).
        self._writes = 0
        #: The App's login (``<slug>[bot]``), as the gateway knows it (learnt by :meth:`whoami`).
        self.bot_login: str | None = None

    def __repr__(self) -> str:  # never the secret
        return f"Door({self.agent_id}, launch {self.launch_token})"

    def call(self, op: str, **fields: Any) -> Mapping[str, Any]:
        answer = self._transport(
            {
                "op": op,
                "agent_id": self.agent_id,
                "launch_token": self.launch_token,
                "secret": self._secret,
                **fields,
            }
        )
        if "error" in answer:
            code = str(answer.get("code") or "invalid_request")
            refused = cast(RefusalCode, code if code in REFUSAL_CODES else "invalid_request")
            raise LaunchRefusedError(refused, str(answer["error"]))
        return answer

    # --- who the task is ---------------------------------------------------------------------

    def whoami(self) -> AgentRecord:
        """The agent's own record; the App's login is kept in :attr:`bot_login`."""
        answer = self.call("whoami")
        login = answer.get("bot_login")
        self.bot_login = str(login) if login else None
        return AgentRecord.model_validate(answer["agent"])

    def begin(self) -> tuple[AgentRecord, int]:
        """Take the agent's lease (CREATED becomes ACTIVE): its record and its POSIX uid."""
        answer = self.call("begin")
        return AgentRecord.model_validate(answer["agent"]), int(answer["uid"])

    def heartbeat(self) -> str:
        """Renew the lease; the agent's status (LaunchRefusedError ``lease_lost`` once it is gone)."""
        return str(self.call("heartbeat").get("status", ""))

    def release(self) -> None:
        self.call("release")

    # --- its inbox ---------------------------------------------------------------------------

    def pending_inbox(self, agent_id: str | None = None) -> list[InboxItem]:
        """The inbox's first page (the gateway hands at most INBOX_PAGE_ITEMS at once)."""
        return self.inbox_page()[0]

    def inbox_page(self) -> tuple[list[InboxItem], int]:
        """The inbox's first page, oldest first, and how many items wait after it."""
        answer = self.call("inbox")
        more = answer.get("more", 0)
        return [InboxItem.model_validate(item) for item in answer["items"]], more if isinstance(
            more, int
        ) else 0

    def ack_inbox(self, agent_id: str | None, items: list[InboxItem]) -> None:
        if items:
            self.call("ack", items=[item.model_dump(mode="json") for item in items])

    # --- credentials ---------------------------------------------------------------------------

    def github_token(self) -> str:
        """A read-only installation token for the agent's repository (reused until near expiry)."""
        return self._cached_token("github_token")

    def push_token(self) -> str:
        """A dev agent's token to push its branch (contents only), for the framework's own clone."""
        return self._cached_token("push_token")

    def _cached_token(self, op: str) -> str:
        with self._lock:
            cached = self._tokens.get(op)
            if cached is not None and cached[1] - self.clock() > TOKEN_REFRESH_MARGIN:
                return cached[0]
            answer = self.call(op)
            self._tokens[op] = (str(answer["token"]), datetime.fromisoformat(str(answer["expires_at"])))
            return self._tokens[op][0]

    def github(self, write: Mapping[str, Any]) -> Any:
        """Have the gateway carry out a GitHub write for the agent (as its role); GitHub's answer.

        Each write has its own key (:mod:`squadron.domain.writes`): when the gateway cannot be
        heard (the invocation failed in transit, perhaps after the write was done), the same
        request is sent again, up to :data:`WRITE_ATTEMPTS` times, and the gateway answers it
        with what the first did instead of writing twice.
        """
        with self._lock:
            self._writes += 1
            key = write_key(self.launch_token, self._writes)
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                return self.call("github", write=dict(write), key=key)["result"]
            except GatewayUnavailableError:
                if attempt == WRITE_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def model_key(self) -> tuple[Literal["byok", "copilot", "none"], str | None]:
        """The provider key the agent's role names: BYOK, the Copilot token, or none configured."""
        answer = self.call("model_key")
        kind = str(answer.get("kind"))
        if kind not in ("byok", "copilot", "none"):
            raise LaunchRefusedError("invalid_request", f"the gateway answered a key of kind {kind!r}")
        key = answer.get("key")
        return cast(Literal["byok", "copilot", "none"], kind), (str(key) if key is not None else None)

    # --- memory and context ------------------------------------------------------------------

    def remember(self, fact: str, evidence: str, audience: str = "repository") -> str:
        """Propose a fact to the repository's memory; what the memory said."""
        return str(self.call("remember", fact=fact, evidence=evidence, audience=audience)["remembered"])

    def recall(self, query: str, limit: int = 10) -> list[str]:
        """The facts the agent may see that match ``query``, one line each."""
        return [str(line) for line in self.call("recall", query=query[:500], limit=limit)["facts"]]

    def brief(self, query: str) -> tuple[str, str, str]:
        """(shared context, memory, artifacts) the session starts with ("" for any there is none of)."""
        answer = self.call("brief", query=query[:500])
        return (
            str(answer.get("context") or ""),
            str(answer.get("memory") or ""),
            str(answer.get("artifacts") or ""),
        )

    def publish_artifact(self, name: str, content: str, issue_number: int | None) -> str:
        answer = self.call("publish_artifact", name=name, content=content, issue_number=issue_number)
        return f"Published {answer['published']} (revision {answer['revision']})."

    def read_artifact(self, name: str, issue_number: int | None) -> str:
        return str(self.call("read_artifact", name=name, issue_number=issue_number)["artifact"])

    # --- what it tells the router ------------------------------------------------------------

    def pushed(self) -> str:
        """Tell the router the agent pushed its branch (the gateway reads its PR from GitHub)."""
        return str(self.call("send", message={"kind": "pushed"})["delivery_id"])

    def register_blocker(self, issue: int, blocker: int, *, sleep: bool, note: str, what: str) -> str:
        message = {
            "kind": "register_blocker",
            "issue_number": issue,
            "blocker_number": blocker,
            "sleep": sleep,
            "note": note,
            "what": what,
        }
        return str(self.call("send", message=message)["delivery_id"])

    def task_ended(
        self,
        outcome: Literal["idle", "sleeping", "escalated", "failed"],
        *,
        usage: TaskUsage,
        reason: str = "",
        summary: str = "",
        saved: str = "",
        finished: bool = True,
    ) -> str:
        message = {
            "kind": "task_ended",
            "outcome": outcome,
            "reason": reason[:4_000],
            "summary": summary[:8_000],
            "saved": saved[:2_000],
            "usage": usage.model_dump(),
            "finished": finished,
        }
        return str(self.call("send", message=message)["delivery_id"])

    # --- the janitor (squadron.agent.janitor) -------------------------------------------------

    def purge_claim(self) -> list[str]:
        """Finished agents past the retention, claimed for this task to remove their state (ids)."""
        return [str(agent_id) for agent_id in self.call("purge_claim").get("agents", [])]

    def purged(self, agent_ids: Iterable[str]) -> list[str]:
        """Report the claimed agents whose directories are gone; those recorded purged."""
        return [str(agent_id) for agent_id in self.call("purged", agents=list(agent_ids)).get("purged", [])]

    def publish(self, points: Iterable[MetricPoint]) -> None:
        given = [
            {"name": p.name, "value": p.value, "dimension": p.dimension[1] if p.dimension else None}
            for p in points
        ]
        for start in range(0, len(given), 50):
            self.call("metrics", points=given[start : start + 50])
