"""The agent registry: one DynamoDB table, shaped by the adapter's TABLE_DEFINITION."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from squadron.adapters.dynamo_registry import STATUS_INDEX, TABLE_DEFINITION, TTL_ATTRIBUTE


def _key(name: str) -> dynamodb.Attribute:
    types = {a["AttributeName"]: a["AttributeType"] for a in TABLE_DEFINITION["AttributeDefinitions"]}
    assert types[name] == "S", f"{name} is not a string key"
    return dynamodb.Attribute(name=name, type=dynamodb.AttributeType.STRING)


class RegistryTable(Construct):
    """Agents, issue state, blocker edges, PR links, inboxes, reviews and delivery records.

    On-demand capacity, point-in-time recovery, AWS-owned encryption, deletion
    protection and RETAIN: losing the registry loses every agent's place.
    Items expire through ``expires_at`` (delivery records after four days).
    """

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        (hash_key, range_key) = (k["AttributeName"] for k in TABLE_DEFINITION["KeySchema"])
        (index,) = TABLE_DEFINITION["GlobalSecondaryIndexes"]
        assert index["IndexName"] == STATUS_INDEX
        (index_hash, index_range) = (k["AttributeName"] for k in index["KeySchema"])
        self.table = dynamodb.TableV2(
            self,
            "Table",
            partition_key=_key(hash_key),
            sort_key=_key(range_key),
            billing=dynamodb.Billing.on_demand(),
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=TTL_ATTRIBUTE,
            deletion_protection=True,
            # New images carry the committed domain events to their publisher (see event_bus.py).
            dynamo_stream=dynamodb.StreamViewType.NEW_IMAGE,
            removal_policy=cdk.RemovalPolicy.RETAIN,
            global_secondary_indexes=[
                dynamodb.GlobalSecondaryIndexPropsV2(
                    index_name=STATUS_INDEX,
                    partition_key=_key(index_hash),
                    sort_key=_key(index_range),
                    projection_type=dynamodb.ProjectionType.ALL,
                )
            ],
        )
