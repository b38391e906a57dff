"""The commit point: a decision's writes, events and record all or nothing, and its record read
back (the :class:`~squadron.registry_ports.Decisions` port)."""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from squadron.adapters.registry.keys import (
    BATCH_GET_KEYS,
    DECISION_RETENTION,
    DECISION_SHARDS,
    HELD_BY,
    HELD_ENTITY,
    STATUS_INDEX,
    TRANSACTION_ITEMS,
    TTL_ATTRIBUTE,
    agent_item,
    agent_key,
    deserializer,
    dump_item,
    inbox_item,
    iso,
    load_item,
)
from squadron.adapters.registry.table import RegistryTable
from squadron.adapters.staged_decisions import LOCKING
from squadron.domain.agents import ConflictError, RegistryError
from squadron.domain.domain_events import DomainEvent
from squadron.domain.effects import (
    AddBlocker,
    AgentWrite,
    Decision,
    DeliverInbox,
    LinkPullRequest,
    PutAgent,
    RemoveBlocker,
    Write,
    commit_agents,
)


class DynamoDecisions(RegistryTable):
    """Decisions committed whole (staged past one transaction), read, finished, swept."""

    def commit(self, writes: Sequence[Write], decision: Decision, events: Sequence[DomainEvent] = ()) -> None:
        """Store ``writes``, ``events`` and ``decision`` all or nothing (see :mod:`squadron.domain.effects`).

        One TransactWriteItems: every agent write conditional on its version (an agent written
        twice is written once, expecting the version the decision read), edges and links, the
        blockers' "not closed" checks, the decision's domain events (one item each, which the
        table's stream carries to the bus and which stays as the repository's history for
        :attr:`history_retention`; conditional on not existing, so an event is stored, and
        published, once) and the decision record, conditional on not existing. A lost condition
        raises :class:`ConflictError` and nothing is stored.

        A decision of more than 100 items (a closed issue waking dozens of agents) is staged
        (:mod:`squadron.adapters.staged_decisions`): its record and a plan of every request are
        stored first, its agents held, then one transaction is its commit point and the rest is
        applied in chunks, each once; a lost condition before the commit point releases what
        was held and raises ConflictError, with nothing of the decision left. A crash in between
        leaves the record to whoever reads it next (:meth:`decision`, a held agent's reader,
        the reconciler's sweep), who carries it to the same end. Its outbox can be claimed only
        once it is applied, and its events are stored (so published) once, after its commit point.
        """
        agents = commit_agents(writes)
        parts: dict[tuple[str, str], tuple[str, dict[str, Any], str]] = {}
        checks: list[tuple[str, dict[str, Any], str]] = []
        new_edges: set[tuple[str, str]] = set()

        def add(found: Iterable[tuple[str, dict[str, Any], str]]) -> set[tuple[str, str]]:
            keys: set[tuple[str, str]] = set()
            for kind, request, what in found:
                if kind == "ConditionCheck":
                    checks.append((kind, request, what))
                    continue
                item = request.get("Item") or request.get("Key") or {}
                key = (str(item["PK"]["S"]), str(item["SK"]["S"]))
                parts[key] = (kind, request, what)
                keys.add(key)
            return keys

        for write in agents:
            expected = write.expected_version
            detail = "already exists" if expected is None else f"expected version {expected}"
            add([("Put", self._agent_put(write), f"agent {write.record.agent_id}: {detail}")])
            branch = self._branch_put(write.record)
            if branch is not None:
                add([("Put", branch, f"branch {write.record.branch}: not written")])
        for effect in writes:
            match effect:
                case AddBlocker(repo_id=repo_id, issue=issue, blocker=blocker):
                    new_edges |= add(self._add_blocker_parts(repo_id, issue, blocker))
                case RemoveBlocker(repo_id=repo_id, issue=issue, blocker=blocker):
                    add(self._remove_blocker_parts(repo_id, issue, blocker))
                case LinkPullRequest(repo_id=repo_id, pr_number=pr, issue_number=issue):
                    add(self._link_parts(repo_id, pr, issue))
                case DeliverInbox(item=item):
                    # Unconditional: the commit happens once per decision (its record's condition).
                    add([("Put", {"TableName": self.table_name, "Item": inbox_item(item)}, "inbox")])
                case PutAgent():
                    pass  # among commit_agents above
        record = ("Put", self._decision_put(decision), f"decision {decision.key}: already committed")
        published = [("Put", self._event_put(event), f"event {event.id}: exists") for event in events]
        if len(checks) + len(parts) + len(published) + 1 <= TRANSACTION_ITEMS:
            self._transact([*checks, *parts.values(), *published, record])
            return
        self._commit_staged(decision, agents, checks, parts, new_edges=new_edges, published=published)

    def _commit_staged(
        self,
        decision: Decision,
        agents: Sequence[AgentWrite],
        checks: Sequence[tuple[str, dict[str, Any], str]],
        parts: Mapping[tuple[str, str], tuple[str, dict[str, Any], str]],
        *,
        new_edges: set[tuple[str, str]],
        published: Sequence[tuple[str, dict[str, Any], str]],
    ) -> None:
        """Plan a decision too big for one transaction and drive it (:mod:`staged_decisions`)."""
        key = decision.key
        agent_keys = {
            (agent_key(w.record.agent_id)["PK"], agent_key(w.record.agent_id)["SK"]) for w in agents
        }
        commit = [*checks, *(parts[edge] for edge in sorted(new_edges))]
        if len(commit) >= TRANSACTION_ITEMS:
            raise RegistryError(
                f"decision {key}: {len(new_edges) // 2} new blocker edges and their checks do not fit "
                "the one transaction of its commit point"
            )
        befores = self._agent_images([w.record.agent_id for w in agents if w.expected_version is not None])
        holder = {":key": {"S": key}}
        locks: list[tuple[str, dict[str, Any], str]] = []
        unlocks: list[tuple[str, dict[str, Any], str]] = []
        applies: list[tuple[str, dict[str, Any], str]] = []
        for write in agents:
            agent = write.record.agent_id
            item_key = dump_item(agent_key(agent))
            if write.expected_version is None:
                locks.append(
                    (
                        "Put",
                        {
                            "Item": {**item_key, **dump_item({"entity": HELD_ENTITY, HELD_BY: key})},
                            "ConditionExpression": "attribute_not_exists(PK) OR held_by = :key",
                            "ExpressionAttributeValues": holder,
                        },
                        f"agent {agent}: already exists",
                    )
                )
                unlocks.append(
                    (
                        "Delete",
                        {
                            "Key": item_key,
                            "ConditionExpression": "held_by = :key",
                            "ExpressionAttributeValues": holder,
                        },
                        f"agent {agent}: released",
                    )
                )
                applies.append(
                    (
                        "Put",
                        {
                            "Item": dump_item(agent_item(write.record)),
                            "ConditionExpression": "held_by = :key",
                            "ExpressionAttributeValues": holder,
                        },
                        f"agent {agent}: not held by {key}",
                    )
                )
                continue
            before = befores.get(agent)
            stored = int(before["version"]["N"]) if before is not None else None
            if stored != write.expected_version or (before is not None and HELD_BY in before):
                raise ConflictError(f"agent {agent}", f"expected version {write.expected_version}")
            locks.append(
                (
                    "Update",
                    {
                        "Key": item_key,
                        "UpdateExpression": "SET held_by = :key",
                        "ConditionExpression": (
                            "(version = :expected AND attribute_not_exists(held_by)) OR held_by = :key"
                        ),
                        "ExpressionAttributeValues": {
                            **holder,
                            ":expected": {"N": str(write.expected_version)},
                        },
                    },
                    f"agent {agent}: expected version {write.expected_version}",
                )
            )
            unlocks.append(
                (
                    "Update",
                    {
                        "Key": item_key,
                        "UpdateExpression": "REMOVE held_by",
                        "ConditionExpression": "held_by = :key",
                        "ExpressionAttributeValues": holder,
                    },
                    f"agent {agent}: released",
                )
            )
            applies.append(_agent_apply(key, write, before or {}))
        others = [
            part
            for item_key, part in parts.items()
            if item_key not in agent_keys and item_key not in new_edges
        ]
        pending = dict(self._decision_put(decision)["Item"])
        pending.pop("done", None)  # no executor claims its outbox before it is applied
        pending.setdefault("GSI1PK", {"S": _open_decisions(key)})  # the sweep finds it if it is left
        pending.setdefault("GSI1SK", {"S": f"{iso(decision.decided_at)}#{key}"})
        plan = {
            "locks": [_planned(p) for p in locks],
            "unlocks": [_planned(p) for p in unlocks],
            "commit": [_planned(p) for p in commit],
            "writes": [*(_planned(p) for p in applies), *(_planned(p) for p in others)],
            "events": [_planned(p) for p in published],
            "done": decision.done,
        }
        written = self._store_pending(key, pending, plan)
        lost = self._run(key, LOCKING, written, plan)
        if lost is not None:
            raise ConflictError(f"decision {key}", f"{lost}; nothing of it is stored")

    def _agent_images(self, agent_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored items of ``agent_ids`` (consistent BatchGetItem, 100 keys a call)."""
        found: dict[str, dict[str, Any]] = {}
        by_key = {(agent_key(a)["PK"], agent_key(a)["SK"]): a for a in agent_ids}
        ordered = list(by_key)
        for start in range(0, len(ordered), BATCH_GET_KEYS):
            keys: list[Any] = [
                dump_item({"PK": pk, "SK": sk}) for pk, sk in ordered[start : start + BATCH_GET_KEYS]
            ]
            while keys:
                answer = self._call(
                    "batch_get_item", RequestItems={self.table_name: {"Keys": keys, "ConsistentRead": True}}
                )
                for item in answer.get("Responses", {}).get(self.table_name, []):
                    found[by_key[(item["PK"]["S"], item["SK"]["S"])]] = item
                keys = answer.get("UnprocessedKeys", {}).get(self.table_name, {}).get("Keys", [])
        return found

    def _decision_put(self, decision: Decision) -> dict[str, Any]:
        item: dict[str, Any] = {
            "PK": f"DECISION#{decision.key}",
            "SK": "DECISION",
            "entity": "decision",
            "key": decision.key,
            "decided_at": iso(decision.decided_at),
            "done": decision.done,
            "installation_id": decision.installation_id,
            "repo_full_name": decision.repo_full_name,
            "repo_id": decision.repo_id,
            TTL_ATTRIBUTE: int((decision.decided_at + DECISION_RETENTION).timestamp()),
        }
        if decision.outside:
            item["outside"] = zlib.compress(decision.dump_outside())
        if not decision.done:
            item["GSI1PK"] = _open_decisions(decision.key)
            item["GSI1SK"] = f"{iso(decision.decided_at)}#{decision.key}"
        return {
            "TableName": self.table_name,
            "Item": dump_item(item),
            "ConditionExpression": "attribute_not_exists(PK)",
        }

    def decision(self, key: str) -> Decision | None:
        """The committed decision ``key``, or None. A staged one not yet applied is carried to its
        end first (:meth:`drive`): applied, it is returned; aborted, nothing of it is left."""
        response = self._call(
            "get_item",
            TableName=self.table_name,
            Key=dump_item({"PK": f"DECISION#{key}", "SK": "DECISION"}),
            ConsistentRead=True,
        )
        item = response.get("Item")
        if item is not None and "stage" in item:
            self.drive(key)
            return self.decision(key)
        return None if item is None else _decision_from(item)

    def finish_decision(self, key: str, at: datetime) -> None:
        """Mark the decision carried out: off the open index, its outbox dropped."""
        self._call(
            "update_item",
            TableName=self.table_name,
            Key=dump_item({"PK": f"DECISION#{key}", "SK": "DECISION"}),
            UpdateExpression="SET done = :t, finished_at = :at REMOVE GSI1PK, GSI1SK, outside",
            ConditionExpression="attribute_exists(PK)",
            ExpressionAttributeValues=dump_item({":t": True, ":at": iso(at)}),
        )

    def unfinished_decisions(self, decided_before: datetime, limit: int = 100) -> list[Decision]:
        """Decisions not carried out and not tried since ``decided_before``, the longest untouched
        first (each claim moves its decision back: one that keeps failing starves no other)."""
        found: list[tuple[str, Decision]] = []
        for shard in range(DECISION_SHARDS):
            page = self._call(
                "query",
                TableName=self.table_name,
                IndexName=STATUS_INDEX,
                KeyConditionExpression="GSI1PK = :pk AND GSI1SK < :before",
                ExpressionAttributeValues=dump_item(
                    {":pk": f"DECISION#OPEN#{shard}", ":before": iso(decided_before)}
                ),
                Limit=limit,
            )
            found += [(item["GSI1SK"]["S"], _decision_from(item)) for item in page.get("Items", [])]
        return [decision for _, decision in sorted(found, key=lambda pair: pair[0])[:limit]]


def _planned(part: tuple[str, dict[str, Any], str]) -> list[Any]:
    """A request as the plan keeps it (the table is the driver's)."""
    kind, request, what = part
    return [kind, {k: v for k, v in request.items() if k != "TableName"}, what]


def _agent_apply(key: str, write: AgentWrite, before: Mapping[str, Any]) -> tuple[str, dict[str, Any], str]:
    """The update a staged decision applies to an agent it holds: the fields it changed since
    ``before`` (what it read), so a lease or launch confirmation written meanwhile is kept, and
    the version moved on as the decision moved it; the hold released."""
    new = dump_item(agent_item(write.record))
    names: dict[str, str] = {}
    values: dict[str, Any] = {":key": {"S": key}}
    sets: list[str] = []
    for index, (attribute, value) in enumerate(sorted(new.items())):
        if attribute in ("PK", "SK", "version") or before.get(attribute) == value:
            continue
        names[f"#a{index}"] = attribute
        values[f":v{index}"] = value
        sets.append(f"#a{index} = :v{index}")
    delta = max(1, write.record.version - (write.expected_version or 0))
    values[":delta"] = {"N": str(delta)}
    sets.append("version = version + :delta")
    request: dict[str, Any] = {
        "Key": dump_item(agent_key(write.record.agent_id)),
        "UpdateExpression": f"SET {', '.join(sets)} REMOVE held_by",
        "ConditionExpression": "held_by = :key",
        "ExpressionAttributeValues": values,
    }
    if names:
        request["ExpressionAttributeNames"] = names
    return ("Update", request, f"agent {write.record.agent_id}: not held by {key}")


def _open_decisions(key: str) -> str:
    shard = hashlib.sha256(key.encode()).digest()[0] % DECISION_SHARDS
    return f"DECISION#OPEN#{shard}"


def _decision_from(item: Mapping[str, Any]) -> Decision:
    raw = deserializer.deserialize(item["outside"]) if "outside" in item else None
    data = load_item({k: v for k, v in item.items() if k != "outside"})
    outside = Decision.load_outside(zlib.decompress(bytes(raw))) if raw is not None else ()
    installation = data.get("installation_id")
    repo_id = data.get("repo_id")
    return Decision(
        key=str(data["key"]),
        decided_at=datetime.fromisoformat(str(data["decided_at"]).replace("Z", "+00:00")),
        outside=outside,
        done=bool(data.get("done")),
        installation_id=int(installation) if installation is not None else None,
        repo_full_name=str(data.get("repo_full_name") or ""),
        repo_id=int(repo_id) if repo_id is not None else None,
    )
