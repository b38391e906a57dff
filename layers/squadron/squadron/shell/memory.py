"""A repository's memory, carried out: the pure rules of :mod:`squadron.domain.memory` on a store.

Used by the agent gateway (an agent's ``remember``/``recall`` and its session's brief, always
for the repository of the verified agent), by the router (a person's merge confirms the facts
its pull request lists) and by the operator CLI (``squadron memory``). A write that loses its
version race is decided again on a fresh read (a few times), never forced.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime

from squadron.domain.agents import ConflictError
from squadron.domain.memory import (
    Audience,
    MemoryFact,
    MemoryPolicy,
    MemoryRefusedError,
    Reader,
    Writer,
    brief,
    confirm,
    pin,
    recall,
    remember,
    used,
)
from squadron.ports import MemoryStore
from squadron.shell.conditional import read_change_put

logger = logging.getLogger(__name__)

#: Decisions retried on a fresh read when a concurrent write moved a fact's version.
ATTEMPTS = 4


def _now() -> datetime:
    return datetime.now(UTC)


class Memory:
    def __init__(self, store: MemoryStore, *, clock: Callable[[], datetime] = _now) -> None:
        self.store = store
        self.clock = clock

    def _put(self, fact: MemoryFact, expected: int | None, policy: MemoryPolicy) -> None:
        self.store.put_fact(fact, expected, fact.expires_at(policy))

    # --- agents -------------------------------------------------------------------------------

    def remember(
        self, writer: Writer, *, text: str, evidence: str, audience: Audience, policy: MemoryPolicy
    ) -> str:
        """Propose a fact as ``writer``; the answer for the model (MemoryRefusedError: why not)."""
        try:
            done = read_change_put(
                lambda: self.store.facts(writer.repo_id),
                lambda facts: remember(
                    facts,
                    writer,
                    text=text,
                    evidence=evidence,
                    audience=audience,
                    policy=policy,
                    now=self.clock(),
                ),
                lambda _facts, decided: self._put(decided.fact, decided.expected_version, policy),
                attempts=ATTEMPTS,
            )
        except ConflictError:
            raise MemoryRefusedError("memory is busy: try again") from None
        decided = done.written
        assert decided is not None  # remember always decides something (or refuses)
        if decided.evict is not None:
            self.store.delete_fact(writer.repo_id, decided.evict.fact_id)
            logger.info(
                "memory of %s: %s evicted for %s",
                writer.repo_full_name,
                decided.evict.fact_id,
                decided.fact.fact_id,
            )
        return decided.message

    def recall(
        self, reader: Reader, repo_id: int, query: str, *, policy: MemoryPolicy, limit: int
    ) -> list[MemoryFact]:
        """The facts ``reader`` may see that match ``query``; each one's use is counted."""
        now = self.clock()
        found = recall(self.store.facts(repo_id), reader, query, policy=policy, now=now, limit=limit)
        self._count_use(found, policy, now)
        return found

    def brief(self, reader: Reader, repo_id: int, query: str, *, policy: MemoryPolicy) -> str:
        """What a session of ``reader`` starts with ("" when memory holds nothing it may see)."""
        if not policy.enabled:
            return ""
        now = self.clock()
        text, given = brief(self.store.facts(repo_id), reader, query, policy=policy, now=now)
        self._count_use(given, policy, now)
        return text

    def proposals(self, repo_id: int, agent_id: str, *, policy: MemoryPolicy) -> list[MemoryFact]:
        """``agent_id``'s facts waiting for confirmation, oldest first."""
        now = self.clock()
        mine = [
            f
            for f in self.store.facts(repo_id)
            if f.status == "proposed" and f.agent_id == agent_id and not f.expired(policy, now)
        ]
        return sorted(mine, key=lambda f: (f.created_at, f.fact_id))

    def _count_use(self, facts: Iterable[MemoryFact], policy: MemoryPolicy, now: datetime) -> None:
        for fact in facts:
            try:
                self._put(used(fact, now), fact.version, policy)
            except ConflictError:  # someone else used or changed it meanwhile: their count stands
                logger.info("use of fact %s not counted: it changed meanwhile", fact.fact_id)

    # --- people -------------------------------------------------------------------------------

    def confirm(
        self,
        repo_id: int,
        fact_ids: Sequence[str],
        *,
        by: str,
        how: str,
        policy: MemoryPolicy,
        authors: Iterable[str] | None = None,
    ) -> list[MemoryFact]:
        """Confirm the proposals ``fact_ids`` (those of ``authors`` only, when given); the facts
        confirmed now. Idempotent: a confirmed fact stays as it was."""
        wanted = set(fact_ids)
        only = set(authors) if authors is not None else None
        confirmed: list[MemoryFact] = []
        for _attempt in range(ATTEMPTS):
            now = self.clock()
            pending = [
                f
                for f in self.store.facts(repo_id)
                if f.fact_id in wanted
                and f.status == "proposed"
                and (only is None or f.agent_id in only)
                and f.fact_id not in {c.fact_id for c in confirmed}
            ]
            lost = False
            for fact in pending:
                done = confirm(fact, by=by, how=how, at=now)
                try:
                    self._put(done, fact.version, policy)
                    confirmed.append(done)
                except ConflictError:
                    lost = True
            if not lost:
                break
        return confirmed

    def pin(self, repo_id: int, fact_id: str, *, by: str, policy: MemoryPolicy) -> MemoryFact:
        """Pin ``fact_id`` (confirming it): it never expires. MemoryRefusedError if unknown."""
        try:
            done = read_change_put(
                lambda: self.get(repo_id, fact_id),
                lambda fact: pinned if (pinned := pin(fact, by=by, at=self.clock())) != fact else None,
                lambda fact, pinned: self._put(pinned, fact.version, policy),
                attempts=ATTEMPTS,
            )
        except ConflictError:
            raise MemoryRefusedError(f"fact {fact_id} keeps changing: try again") from None
        return done.written if done.written is not None else done.read

    def forget(self, repo_id: int, fact_id: str) -> bool:
        """Delete ``fact_id``; whether it was there."""
        return self.store.delete_fact(repo_id, fact_id)

    def get(self, repo_id: int, fact_id: str) -> MemoryFact:
        found = next((f for f in self.store.facts(repo_id) if f.fact_id == fact_id), None)
        if found is None:
            raise MemoryRefusedError(f"no fact {fact_id} in this repository's memory")
        return found

    def all(self, repo_id: int) -> list[MemoryFact]:
        """Every fact of the repository (expired ones not yet deleted included), newest first."""
        return sorted(self.store.facts(repo_id), key=lambda f: (f.created_at, f.fact_id), reverse=True)
