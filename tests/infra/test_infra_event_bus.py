"""The domain event bus in the stack: bus, archive, schema registry, the rule to the event log,
and a publisher that reads only the registry's stream and puts only to this bus."""

from __future__ import annotations

import json
from typing import Any

from squadron.domain.domain_events import CATALOGUE, SOURCE
from tests.infra.synth import REPO_ROOT, Synthesized


def _one(synthesized: Synthesized, resource_type: str) -> dict[str, Any]:
    (resource,) = synthesized.resources(resource_type).values()
    return dict(resource["Properties"])


def test_a_bus_per_stage_archived_with_every_squadron_event(synthesized: Synthesized) -> None:
    assert _one(synthesized, "AWS::Events::EventBus")["Name"] == "squadron-ci"
    archive = _one(synthesized, "AWS::Events::Archive")
    assert archive["EventPattern"] == {"source": [SOURCE]}
    assert archive["RetentionDays"] == 365


def test_every_catalogued_event_has_its_schema_registered(synthesized: Synthesized) -> None:
    assert _one(synthesized, "AWS::EventSchemas::Registry")["RegistryName"] == "squadron-ci"
    schemas = {
        s["Properties"]["SchemaName"]: s["Properties"]
        for s in synthesized.resources("AWS::EventSchemas::Schema").values()
    }
    assert set(schemas) == {f"{SOURCE}@{name}" for name in CATALOGUE}
    for name in CATALOGUE:
        schema = schemas[f"{SOURCE}@{name}"]
        assert schema["Type"] == "JSONSchemaDraft4"
        checked_in = json.loads((REPO_ROOT / "schemas" / "events" / f"{name}.json").read_text())
        assert json.loads(schema["Content"]) == checked_in


def test_the_registry_streams_new_images_to_the_publisher_filtered_on_events(
    synthesized: Synthesized,
) -> None:
    table = _one(synthesized, "AWS::DynamoDB::GlobalTable")
    assert table["StreamSpecification"] == {"StreamViewType": "NEW_IMAGE"}
    (mapping,) = [
        m["Properties"]
        for m in synthesized.resources("AWS::Lambda::EventSourceMapping").values()
        if "StreamArn" in json.dumps(m["Properties"]["EventSourceArn"])
    ]
    (pattern,) = mapping["FilterCriteria"]["Filters"]
    assert json.loads(pattern["Pattern"]) == {
        "eventName": ["INSERT"],
        "dynamodb": {"NewImage": {"entity": {"S": ["event"]}}},
    }
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BisectBatchOnFunctionError"] is True
    assert "OnFailure" in mapping["DestinationConfig"]


def _statements(synthesized: Synthesized, role_prefix: str) -> list[dict[str, Any]]:
    policies = [
        p["Properties"]
        for logical_id, p in synthesized.resources("AWS::IAM::Policy").items()
        if logical_id.startswith(role_prefix)
    ]
    return [s for p in policies for s in p["PolicyDocument"]["Statement"]]


def test_the_publisher_reads_only_the_stream_and_puts_only_to_this_bus(synthesized: Synthesized) -> None:
    statements = _statements(synthesized, "DomainEventsPublisherRoleDefaultPolicy")
    actions = {
        a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert not any(
        a.startswith("dynamodb:")
        and a
        not in {
            "dynamodb:DescribeStream",
            "dynamodb:GetRecords",
            "dynamodb:GetShardIterator",
            "dynamodb:ListStreams",
        }
        for a in actions
    ), actions
    assert "dynamodb:PutItem" not in actions and "dynamodb:Query" not in actions
    puts = [s for s in statements if s["Action"] == "events:PutEvents"]
    assert len(puts) == 1
    (bus_id,) = synthesized.resources("AWS::Events::EventBus")
    assert puts[0]["Resource"] == {"Fn::GetAtt": [bus_id, "Arn"]}
    for statement in statements:
        if any(
            str(a).startswith("dynamodb:") and a != "dynamodb:ListStreams"
            for a in [statement["Action"]]
            if isinstance(statement["Action"], str)
        ) or (isinstance(statement["Action"], list) and "dynamodb:GetRecords" in statement["Action"]):
            assert "StreamArn" in json.dumps(statement["Resource"])


def test_a_rule_writes_every_event_to_the_log_events_tail_reads(synthesized: Synthesized) -> None:
    rules = [
        r["Properties"]
        for r in synthesized.resources("AWS::Events::Rule").values()
        if "EventBusName" in r["Properties"] and "log-group" in json.dumps(r["Properties"]["Targets"])
    ]
    (rule,) = rules  # the bus's other rule feeds the dashboards (tests/infra/test_infra_dashboards.py)
    assert rule["EventPattern"] == {"source": [SOURCE]}
    (target,) = rule["Targets"]
    assert "log-group" in json.dumps(target["Arn"])
    policy = _one(synthesized, "AWS::Logs::ResourcePolicy")
    document = (
        json.loads(json.dumps(policy["PolicyDocument"]))
        if isinstance(policy["PolicyDocument"], dict)
        else policy["PolicyDocument"]
    )
    assert "events.amazonaws.com" in json.dumps(document)
    outputs = synthesized.template_json["Outputs"]
    assert {"EventBusName", "DomainEventsLogGroupName"} <= set(outputs)
