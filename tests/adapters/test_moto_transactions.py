"""The suite's moto (tests/support/moto_transactions.py): a transaction copies no table (its
roll-back is by item, as the local stack's moto server's), and a cancelled transaction still leaves
every item as it was before it."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.dynamodb.models.table import Table

TABLE = "transactions"


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        for n in range(5):
            client.put_item(TableName=TABLE, Item={"pk": {"S": f"item-{n}"}, "v": {"N": "0"}})
        yield client


def _bump(pk: str, expected: int = 0) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": TABLE,
            "Key": {"pk": {"S": pk}},
            "UpdateExpression": "SET v = v + :one",
            "ConditionExpression": "v = :expected",
            "ExpressionAttributeValues": {":one": {"N": "1"}, ":expected": {"N": str(expected)}},
        }
    }


def _values(client: Any) -> dict[str, int]:
    items = client.scan(TableName=TABLE)["Items"]
    return {item["pk"]["S"]: int(item["v"]["N"]) for item in items}


@pytest.mark.parametrize(
    ("writes", "committed"),
    [
        pytest.param([_bump("item-0"), _bump("item-1"), _bump("item-2")], True, id="all hold: committed"),
        pytest.param([_bump("item-0"), _bump("item-1"), _bump("item-2", 7)], False, id="the last fails"),
        pytest.param([_bump("item-0", 7), _bump("item-1"), _bump("item-2")], False, id="the first fails"),
        pytest.param(
            [
                _bump("item-0"),
                {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "new"}, "v": {"N": "9"}}}},
                _bump("item-4", 3),
            ],
            False,
            id="a new item, then a failure",
        ),
    ],
)
def test_a_transaction_commits_whole_or_leaves_every_item_as_it_was(
    dynamodb: Any, writes: list[dict[str, Any]], committed: bool
) -> None:
    before = _values(dynamodb)
    if committed:
        dynamodb.transact_write_items(TransactItems=writes)
        assert _values(dynamodb) == {**before, "item-0": 1, "item-1": 1, "item-2": 1}
    else:
        with pytest.raises(ClientError, match="TransactionCanceled"):
            dynamodb.transact_write_items(TransactItems=writes)
        assert _values(dynamodb) == before


def test_a_transaction_of_many_items_copies_no_table(dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    deepcopy, tables = copy.deepcopy, []

    def counting(value: Any, memo: Any = None) -> Any:
        if isinstance(value, Table):
            tables.append(value.name)
        return deepcopy(value, memo)

    monkeypatch.setattr(copy, "deepcopy", counting)
    dynamodb.transact_write_items(TransactItems=[_bump(f"item-{n}") for n in range(5)])
    with pytest.raises(ClientError, match="TransactionCanceled"):
        dynamodb.transact_write_items(
            TransactItems=[_bump(f"item-{n}", 1) for n in range(4)] + [_bump("item-4", 7)]
        )
    # moto alone copies the whole table once per item (five, then five again); rolled back by item
    # from the start (whatever ran before on this worker), none at all.
    assert tables == []
    assert _values(dynamodb) == {f"item-{n}": 1 for n in range(5)}
