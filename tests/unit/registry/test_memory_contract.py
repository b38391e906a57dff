"""One memory contract, two stores: the in-memory fake and the DynamoDB adapter (under moto),
on the registry's own table (its stream filter never publishes a fact)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Protocol

import boto3
import pytest
from moto import mock_aws

from squadron.adapters.dynamo_memory import DynamoMemory
from squadron.adapters.dynamo_registry import EVENT_ENTITY, TABLE_DEFINITION
from squadron.domain.agents import ConflictError
from squadron.domain.memory import Evidence, MemoryFact, confirm, fact_id
from tests.support.fake_memory import FakeMemory

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


class Store(Protocol):
    def facts(self, repo_id: int) -> list[MemoryFact]: ...
    def put_fact(
        self, fact: MemoryFact, expected_version: int | None, expires_at: datetime | None
    ) -> None: ...
    def delete_fact(self, repo_id: int, fact_id: str) -> bool: ...


@pytest.fixture(params=["fake", "dynamodb"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    if request.param == "fake":
        yield FakeMemory()
        return
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(TableName="registry", **TABLE_DEFINITION)
        yield DynamoMemory("registry", client=client)


def fact(text: str, repo: int = 7) -> MemoryFact:
    return MemoryFact(
        fact_id=fact_id(repo, text),
        repo_id=repo,
        repo_full_name="acme/widgets",
        text=text,
        evidence=Evidence(kind="issue", number=1),
        agent_id=f"{repo}-1-feat-dev",
        role="feat-dev",
        kind="dev",
        created_at=T0,
        last_used_at=T0,
    )


def test_facts_are_kept_per_repository(store: Store) -> None:
    store.put_fact(fact("a"), None, T0 + timedelta(days=28))
    store.put_fact(fact("b"), None, None)
    store.put_fact(fact("a", repo=8), None, None)
    assert sorted(f.text for f in store.facts(7)) == ["a", "b"]
    assert [f.repo_id for f in store.facts(8)] == [8]
    assert store.facts(9) == []


def test_a_new_fact_is_written_once_and_a_change_on_the_version_it_read(store: Store) -> None:
    first = fact("a")
    store.put_fact(first, None, None)
    with pytest.raises(ConflictError):
        store.put_fact(first, None, None)
    done = confirm(first, by="alice", how="cli", at=T0)
    store.put_fact(done, first.version, None)
    with pytest.raises(ConflictError):  # a second writer who read the old version loses
        store.put_fact(confirm(first, by="bob", how="cli", at=T0), first.version, None)
    (kept,) = store.facts(7)
    assert (kept.status, kept.confirmed_by, kept.version) == ("confirmed", "alice", 2)


def test_forget_deletes_once(store: Store) -> None:
    store.put_fact(fact("a"), None, None)
    assert store.delete_fact(7, fact("a").fact_id) is True
    assert store.delete_fact(7, fact("a").fact_id) is False
    assert store.facts(7) == []


def test_the_stored_item_carries_its_ttl_and_is_never_an_event() -> None:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(TableName="registry", **TABLE_DEFINITION)
        DynamoMemory("registry", client=client).put_fact(fact("a"), None, T0 + timedelta(days=28))
        DynamoMemory("registry", client=client).put_fact(fact("pinned"), None, None)
        items = {
            i["data"]["S"].split('"text":"')[1].split('"')[0]: i
            for i in client.scan(TableName="registry")["Items"]
        }
        assert items["a"]["expires_at"] == {"N": str(int((T0 + timedelta(days=28)).timestamp()))}
        assert "expires_at" not in items["pinned"]
        assert all(i["entity"]["S"] != EVENT_ENTITY for i in items.values())
