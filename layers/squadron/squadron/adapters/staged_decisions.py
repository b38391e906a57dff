"""A decision too big for one DynamoDB transaction, committed whole: pending, then applied.

One TransactWriteItems holds at most 100 items (4 MB). A decision that needs more (a closed
issue waking dozens of agents: each an agent, its branch link and an inbox item) is committed
by :meth:`~squadron.adapters.dynamo_registry.DynamoRegistry.commit` through a *plan*: every
request of the decision, prepared once and stored with its record, then carried out in stages
that anybody who finds the record can drive to their end (:meth:`StagedDecisions.drive`):

==============  ===========================================================================
``locking``     The record (no ``done`` yet, so no executor can claim its outbox) and its plan
                are stored, conditional on the record not existing. Each agent the decision
                writes is then *held*: ``held_by = <decision>`` set on it, conditional on the
                version the decision read (a new agent: a placeholder, conditional on not
                existing), a hundred at a time, each transaction conditional on the stage.
                An agent put by anybody else is conditional on its not being held, so from
                here on no other decision can change what this one read.
``committed``   The commit point: one transaction moves the stage, checks the blockers the
                decision adds are not closed and stores those edges. A lost condition before
                here (a lock, a closed blocker) moves the stage to ``aborting`` instead.
                Then the writes and events are applied in transactions of 99, each with a
                marker on the record (``applied_<n>``, conditional on its absence): a chunk is
                applied once, whoever applies it. A held agent is updated in the fields the
                decision changed (a lease or launch confirmation written meanwhile is kept),
                and its hold released.
(applied)       The record gets ``done`` (its outbox can now be claimed) and loses its stage
                and plan, in one transaction.
``aborting``    The holds are released, the record and its plan deleted: nothing of the
                decision is left, and its committer gets a ConflictError (re-read, re-decide).
==============  ===========================================================================

Every transition is conditional on the stage, so two drivers at once (the committer, the
delivery's retry, the reconciler's sweep, a reader that met a held agent) agree on the outcome.
Domain events are written in the chunks after the commit point, each once (its chunk's marker),
so the table's stream carries each event's insert to the bus once.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from squadron.domain.agents import ConflictError, RegistryError

#: TransactWriteItems takes at most 100 items and 4 MB.
TRANSACTION_ITEMS = 100
TRANSACTION_BYTES = 4_000_000
#: A chunk of writes stops short of the 4 MB (the record's marker and DynamoDB's own overhead).
CHUNK_BYTES = 3_500_000
#: A plan is split over items of at most this many (compressed) bytes (an item holds 400 KB).
PLAN_PART_BYTES = 350_000
#: Plan parts stored with the record in one transaction (the rest before it).
PARTS_PER_TRANSACTION = 10

LOCKING, COMMITTED, ABORTING = "locking", "committed", "aborting"

#: A request of the plan: (``Put`` | ``Update`` | ``Delete`` | ``ConditionCheck``, request, what).
Part = tuple[str, dict[str, Any], str]


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def record_key(decision: str) -> dict[str, Any]:
    return {"PK": _s(f"DECISION#{decision}"), "SK": _s("DECISION")}


def plan_key(decision: str, nonce: str, index: int) -> dict[str, Any]:
    return {"PK": _s(f"DECISION#{decision}"), "SK": _s(f"PLAN#{nonce}#{index:04}")}


def encode_plan(plan: Mapping[str, Any]) -> tuple[str, list[bytes]]:
    """The plan as compressed parts, and a name for them (its hash: a re-decided plan that
    differs never mixes its parts with an abandoned one's)."""
    packed = zlib.compress(json.dumps(plan, separators=(",", ":"), sort_keys=True).encode())
    nonce = hashlib.sha256(packed).hexdigest()[:16]
    return nonce, [packed[i : i + PLAN_PART_BYTES] for i in range(0, len(packed), PLAN_PART_BYTES)] or [b""]


def decode_plan(parts: Iterable[bytes]) -> dict[str, Any]:
    plan = json.loads(zlib.decompress(b"".join(parts)))
    if not isinstance(plan, dict):
        raise RegistryError("a decision's plan is not an object")
    return plan


def request_bytes(part: Part) -> int:
    return len(json.dumps(part[1], separators=(",", ":")))


def chunks(parts: Sequence[Part], items: int = TRANSACTION_ITEMS - 1) -> list[list[Part]]:
    """``parts`` in order, in runs of at most ``items`` requests and :data:`CHUNK_BYTES`."""
    found: list[list[Part]] = []
    current: list[Part] = []
    size = 0
    for part in parts:
        weight = request_bytes(part)
        if current and (len(current) >= items or size + weight > CHUNK_BYTES):
            found.append(current)
            current, size = [], 0
        current.append(part)
        size += weight
    if current:
        found.append(current)
    return found


class StagedDecisions:
    """Driving a staged decision through its stages (mixed into the registry: its table)."""

    table_name: str

    if TYPE_CHECKING:

        def _call(self, operation: str, **kwargs: Any) -> Any: ...

    # --- plumbing -------------------------------------------------------------------------

    def _try_transact(self, parts: Sequence[Part]) -> list[int]:
        """Write ``parts`` all or nothing; the indexes whose condition failed ([] if written)."""
        try:
            self._call(
                "transact_write_items",
                TransactItems=[
                    {kind: {"TableName": self.table_name, **request}} for kind, request, _ in parts
                ],
            )
        except ClientError as exc:
            reasons = exc.response.get("CancellationReasons", [])
            failed = [i for i, r in enumerate(reasons) if r.get("Code") == "ConditionalCheckFailed"]
            if not failed:
                raise RegistryError(f"a staged decision's transaction failed: {exc}") from exc
            return failed
        return []

    def _stage_check(self, key: str, stage: str) -> Part:
        return (
            "ConditionCheck",
            {
                "Key": record_key(key),
                "ConditionExpression": "#stage = :stage",
                "ExpressionAttributeNames": {"#stage": "stage"},
                "ExpressionAttributeValues": {":stage": _s(stage)},
            },
            f"decision {key}: no longer {stage}",
        )

    def _move(self, key: str, source: str, target: str, extra: Sequence[Part] = ()) -> list[int]:
        """Move the record from stage ``source`` to ``target`` with ``extra``; failed indexes."""
        update = (
            "Update",
            {
                "Key": record_key(key),
                "UpdateExpression": "SET #stage = :target",
                "ConditionExpression": "#stage = :source",
                "ExpressionAttributeNames": {"#stage": "stage"},
                "ExpressionAttributeValues": {":target": _s(target), ":source": _s(source)},
            },
            f"decision {key}: no longer {source}",
        )
        return self._try_transact([update, *extra])

    def _stored_stage(self, key: str) -> tuple[str | None, dict[str, Any] | None]:
        """The record's stage (None: applied) and the record (None: there is none)."""
        item = self._call(
            "get_item", TableName=self.table_name, Key=record_key(key), ConsistentRead=True
        ).get("Item")
        if item is None:
            return None, None
        return (str(item["stage"]["S"]) if "stage" in item else None), item

    def _plan(self, key: str, item: Mapping[str, Any]) -> dict[str, Any] | None:
        """The record's plan; None when its parts are not all there."""
        nonce = str(item["plan"]["S"])
        count = int(item["plan_parts"]["N"])
        found: dict[int, bytes] = {}
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "PK = :pk AND begins_with(SK, :plan)",
            "ExpressionAttributeValues": {":pk": _s(f"DECISION#{key}"), ":plan": _s(f"PLAN#{nonce}#")},
            "ConsistentRead": True,
        }
        while True:
            page = self._call("query", **request)
            for part in page.get("Items", []):
                found[int(part["SK"]["S"].rsplit("#", 1)[1])] = bytes(part["data"]["B"])
            if "LastEvaluatedKey" not in page:
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        if sorted(found) != list(range(count)):
            return None
        return decode_plan(found[i] for i in range(count))

    # --- storing the plan -----------------------------------------------------------------

    def _store_pending(self, key: str, record: dict[str, Any], plan: Mapping[str, Any]) -> dict[str, Any]:
        """Store the record (stage ``locking``) and its plan, and return the record as stored;
        ConflictError if the record exists."""
        nonce, packed = encode_plan(plan)
        puts: list[Part] = [
            ("Put", {"Item": {**plan_key(key, nonce, i), "data": {"B": data}, **_ttl(record)}}, "plan")
            for i, data in enumerate(packed)
        ]
        first, last = puts[:-PARTS_PER_TRANSACTION], puts[-PARTS_PER_TRANSACTION:]
        for start in range(0, len(first), PARTS_PER_TRANSACTION):
            self._try_transact(first[start : start + PARTS_PER_TRANSACTION])  # unconditional
        pending = {
            **record,
            "stage": _s(LOCKING),
            "plan": _s(nonce),
            "plan_parts": {"N": str(len(packed))},
        }
        put = (
            "Put",
            {"Item": pending, "ConditionExpression": "attribute_not_exists(PK)"},
            f"decision {key}: already committed",
        )
        if self._try_transact([*last, put]):
            raise ConflictError(f"decision {key}", "already committed")
        return pending

    # --- driving it -----------------------------------------------------------------------

    def drive(self, key: str) -> str | None:
        """Carry the staged decision ``key`` to its end: None once it is applied (or when it is
        not staged), else why it was aborted (then nothing of it is stored)."""
        stage, item = self._stored_stage(key)
        if item is None:
            return "it was aborted"
        if stage is None:
            return None
        plan = self._plan(key, item)
        if plan is None:  # applied or aborted meanwhile (its plan goes with its stage)
            stage, item = self._stored_stage(key)
            if item is None:
                return "it was aborted"
            if stage is None:
                return None
            raise RegistryError(f"decision {key}: its plan is incomplete")
        return self._run(key, stage, item, plan)

    def _run(
        self, key: str, stage: str | None, item: Mapping[str, Any], plan: Mapping[str, Any]
    ) -> str | None:
        """:meth:`drive` from ``stage`` of the record ``item`` (as read or stored) and its plan."""
        lost: list[str] = []
        while True:
            if stage == LOCKING:
                stage = self._lock(key, plan, lost)
            elif stage == COMMITTED:
                self._apply(key, item, plan)
                return None
            elif stage == ABORTING:
                self._roll_back(key, item, plan)
                return lost[0] if lost else "it was aborted"
            else:
                raise RegistryError(f"decision {key}: unknown stage {stage!r}")
            if stage is None:  # another driver moved it: follow what is stored
                stage, stored = self._stored_stage(key)
                if stored is None:
                    return lost[0] if lost else "it was aborted"
                if stage is None:
                    return None
                item = stored

    def _lock(self, key: str, plan: Mapping[str, Any], lost: list[str]) -> str | None:
        """Hold every agent, then the commit point; the stage reached (None: moved by another).
        What made it abort is added to ``lost``."""
        locks: list[Part] = [tuple(p) for p in plan["locks"]]
        for chunk in chunks(locks):
            failed = self._try_transact([self._stage_check(key, LOCKING), *chunk])
            if 0 in failed:
                return None
            if failed:
                lost.append(chunk[failed[0] - 1][2])
                return self._abort(key)
        commit: list[Part] = [tuple(p) for p in plan["commit"]]
        failed = self._move(key, LOCKING, COMMITTED, commit)
        if 0 in failed:
            return None
        if failed:
            lost.append(commit[failed[0] - 1][2])  # a blocker it adds was closed
            return self._abort(key)
        return COMMITTED

    def _abort(self, key: str) -> str | None:
        return ABORTING if not self._move(key, LOCKING, ABORTING) else None

    def _apply(self, key: str, item: Mapping[str, Any], plan: Mapping[str, Any]) -> None:
        writes: list[Part] = [tuple(p) for p in (*plan["writes"], *plan["events"])]
        runs = chunks(writes)
        for index, chunk in enumerate(runs):
            if f"applied_{index}" in item:
                continue
            marker = (
                "Update",
                {
                    "Key": record_key(key),
                    "UpdateExpression": "SET #applied = :t",
                    "ConditionExpression": "#stage = :committed AND attribute_not_exists(#applied)",
                    "ExpressionAttributeNames": {"#applied": f"applied_{index}", "#stage": "stage"},
                    "ExpressionAttributeValues": {":t": {"BOOL": True}, ":committed": _s(COMMITTED)},
                },
                f"decision {key}: chunk {index} applied",
            )
            failed = self._try_transact([marker, *chunk])
            if failed and 0 not in failed:
                lost = ", ".join(chunk[i - 1][2] for i in failed)
                raise RegistryError(f"decision {key}: committed, but chunk {index} cannot be applied: {lost}")
        done = bool(plan["done"])
        removed = ["#stage", "#plan", "plan_parts", *(f"applied_{i}" for i in range(len(runs)))]
        if done:
            removed += ["GSI1PK", "GSI1SK"]
        finish = (
            "Update",
            {
                "Key": record_key(key),
                "UpdateExpression": f"SET done = :done REMOVE {', '.join(removed)}",
                "ConditionExpression": "#stage = :committed",
                "ExpressionAttributeNames": {"#stage": "stage", "#plan": "plan"},
                "ExpressionAttributeValues": {":done": {"BOOL": done}, ":committed": _s(COMMITTED)},
            },
            f"decision {key}: applied",
        )
        self._try_transact([finish, *self._plan_deletes(key, item)])  # failed: another driver did it

    def _roll_back(self, key: str, item: Mapping[str, Any], plan: Mapping[str, Any]) -> None:
        for kind, request, _what in plan["unlocks"]:
            try:
                self._call(
                    "delete_item" if kind == "Delete" else "update_item",
                    TableName=self.table_name,
                    **request,
                )
            except ClientError:
                continue  # not held by this decision (released before, or never taken)
        gone = (
            "Delete",
            {
                "Key": record_key(key),
                "ConditionExpression": "#stage = :aborting",
                "ExpressionAttributeNames": {"#stage": "stage"},
                "ExpressionAttributeValues": {":aborting": _s(ABORTING)},
            },
            f"decision {key}: aborted",
        )
        self._try_transact([gone, *self._plan_deletes(key, item)])  # failed: another driver did it

    def _plan_deletes(self, key: str, item: Mapping[str, Any]) -> list[Part]:
        nonce = str(item["plan"]["S"])
        count = int(item["plan_parts"]["N"])
        return [("Delete", {"Key": plan_key(key, nonce, i)}, "plan") for i in range(count)]


def _ttl(record: Mapping[str, Any]) -> dict[str, Any]:
    return {"expires_at": record["expires_at"]} if "expires_at" in record else {}
