"""An in-memory MemoryStore with the DynamoDB adapter's conditional semantics (the memory
contract tests run the same cases against both)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from squadron.domain.agents import ConflictError
from squadron.domain.artifacts import Artifact
from squadron.domain.memory import MemoryFact
from squadron.domain.retrospective import RetroRecord


class FakeMemory:
    def __init__(self) -> None:
        #: (repo id, fact id) -> (fact, TTL expiry)
        self.items: dict[tuple[int, str], tuple[MemoryFact, datetime | None]] = {}
        self.calls: Counter[str] = Counter()
        #: (repo id, issue or None, name) -> the artifact
        self.artifact_items: dict[tuple[int, int | None, str], Artifact] = {}
        #: (repo id, period end, issue) -> the retrospective
        self.retros: dict[tuple[int, str, int], RetroRecord] = {}

    @staticmethod
    def _check(held_version: int | None, expected_version: int | None, what: str) -> None:
        """The adapter's condition: new when nothing is held, else over the version read."""
        if expected_version is None and held_version is not None:
            raise ConflictError(f"{what} exists")
        if expected_version is not None and held_version != expected_version:
            raise ConflictError(f"{what} changed meanwhile")

    def facts(self, repo_id: int) -> list[MemoryFact]:
        self.calls["facts"] += 1
        return [fact for (repo, _), (fact, _) in sorted(self.items.items()) if repo == repo_id]

    def put_fact(self, fact: MemoryFact, expected_version: int | None, expires_at: datetime | None) -> None:
        self.calls["put_fact"] += 1
        key = (fact.repo_id, fact.fact_id)
        held = self.items.get(key)
        self._check(held[0].version if held else None, expected_version, f"fact {fact.fact_id}")
        self.items[key] = (fact, expires_at)

    def delete_fact(self, repo_id: int, fact_id: str) -> bool:
        self.calls["delete_fact"] += 1
        return self.items.pop((repo_id, fact_id), None) is not None

    def retrospectives(self, repo_id: int) -> list[RetroRecord]:
        self.calls["retrospectives"] += 1
        return [r for (repo, _, _), r in sorted(self.retros.items()) if repo == repo_id]

    def put_retrospective(self, record: RetroRecord, expected_version: int | None) -> None:
        self.calls["put_retrospective"] += 1
        key = (record.repo_id, record.window_end.isoformat(), record.issue_number)
        held = self.retros.get(key)
        self._check(held.version if held else None, expected_version, f"retrospective #{record.issue_number}")
        self.retros[key] = record

    def artifacts(self, repo_id: int) -> list[Artifact]:
        self.calls["artifacts"] += 1
        return [a for (repo, _, _), a in self.artifact_items.items() if repo == repo_id]

    def put_artifact(self, artifact: Artifact, expected_version: int | None) -> None:
        self.calls["put_artifact"] += 1
        key = (artifact.repo_id, artifact.issue_number, artifact.name)
        held = self.artifact_items.get(key)
        self._check(held.version if held else None, expected_version, f"artifact {artifact.label}")
        self.artifact_items[key] = artifact
