"""Agent tasks' network: no NAT gateway by default (nothing costs between tasks), one as an opt-in."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from bench import cost
from infra.app import build
from tests.infra.synth import SETTINGS_CONTEXT, Synthesized, cdk_json_context

pytestmark = pytest.mark.infra


def _router_environment(template: dict[str, Any]) -> dict[str, Any]:
    functions = template["Resources"].values()
    (router,) = [f for f in functions if f["Type"] == "AWS::Lambda::Function" and "AGENT_SUBNETS" in repr(f)]
    variables: dict[str, Any] = router["Properties"]["Environment"]["Variables"]
    return variables


def _subnet_kinds(template: dict[str, Any], subnets: Any) -> set[str]:
    """Whether the subnets the router launches tasks into are the VPC's public or private ones."""
    names = {part["Ref"] for part in subnets["Fn::Join"][1] if isinstance(part, dict)}
    kinds = set()
    for name in names:
        tags = {t["Key"]: t["Value"] for t in template["Resources"][name]["Properties"].get("Tags", [])}
        kinds.add(tags["aws-cdk:subnet-type"])
    return kinds


def test_by_default_tasks_get_public_addresses_and_nothing_idles(synthesized: Synthesized) -> None:
    template = dict(synthesized.template_json)
    assert synthesized.resources("AWS::EC2::NatGateway") == {}
    assert synthesized.resources("AWS::EC2::EIP") == {}
    environment = _router_environment(template)
    assert environment["AGENT_ASSIGN_PUBLIC_IP"] == "ENABLED"
    assert _subnet_kinds(template, environment["AGENT_SUBNETS"]) == {"Public"}
    group = synthesized.template_json["Resources"][
        synthesized.logical_id(synthesized.stack.agents.security_group)
    ]
    assert "SecurityGroupIngress" not in group["Properties"]  # nothing reaches a task
    egress = group["Properties"]["SecurityGroupEgress"]
    assert [(rule["IpProtocol"], rule["FromPort"], rule["CidrIp"]) for rule in egress] == [
        ("tcp", 443, "0.0.0.0/0")
    ]
    nfs = [
        body["Properties"]
        for body in synthesized.resources("AWS::EC2::SecurityGroupEgress").values()
        if body["Properties"]["GroupId"]["Fn::GetAtt"][0]
        == synthesized.logical_id(synthesized.stack.agents.security_group)
    ]
    assert [(rule["FromPort"], rule["ToPort"]) for rule in nfs] == [(2049, 2049)]  # to the file system only


def test_a_nat_gateway_is_an_opt_in_for_fixed_egress_addresses(tmp_path: Path) -> None:
    app = cdk.App(
        context={**cdk_json_context(), **SETTINGS_CONTEXT, "agent_egress": "nat"}, outdir=str(tmp_path)
    )
    stack = build(app)
    template: dict[str, Any] = dict(app.synth().get_stack_artifact(stack.artifact_id).template)
    kinds = [r["Type"] for r in template["Resources"].values()]
    assert kinds.count("AWS::EC2::NatGateway") == 1
    environment = _router_environment(template)
    assert environment["AGENT_ASSIGN_PUBLIC_IP"] == "DISABLED"
    assert _subnet_kinds(template, environment["AGENT_SUBNETS"]) == {"Private"}
    # The cost model counts the gateway from the template, at the opt-in's price.
    counted = cost.idle_resources(template)
    assert counted.nat_gateways == 1
    extra = sum(cost.idle_month(counted).values()) - sum(
        cost.idle_month(dataclasses.replace(counted, nat_gateways=0)).values()
    )
    assert extra == pytest.approx(sum(cost.nat_month().values()), abs=0.02)


def _resolved(value: Any) -> str:
    """A domain as the template renders it, the stack's region shown as <region>."""
    if isinstance(value, str):
        return value
    parts = value["Fn::Join"][1]
    return "".join(part if isinstance(part, str) else "<region>" for part in parts)


def test_agent_tasks_resolve_only_the_allow_list(synthesized: Synthesized) -> None:
    """The VPC's DNS Firewall: the allowed names first, NXDOMAIN for every other name, on the
    agents' VPC (tasks cannot ask another resolver: their group lets out only 443 and NFS)."""
    template = synthesized.template_json["Resources"]
    (association,) = synthesized.resources("AWS::Route53Resolver::FirewallRuleGroupAssociation").values()
    assert association["Properties"]["VpcId"] == {"Ref": synthesized.logical_id(synthesized.stack.agents.vpc)}
    group_id = association["Properties"]["FirewallRuleGroupId"]["Fn::GetAtt"][0]
    rules = sorted(template[group_id]["Properties"]["FirewallRules"], key=lambda rule: rule["Priority"])
    lists = {
        rule["Action"]: template[rule["FirewallDomainListId"]["Fn::GetAtt"][0]]["Properties"]["Domains"]
        for rule in rules
    }
    assert [rule["Action"] for rule in rules] == ["ALLOW", "BLOCK"]  # the allow list wins
    assert rules[1]["BlockResponse"] == "NXDOMAIN"
    assert lists["BLOCK"] == ["*"]  # every other name
    allowed = [_resolved(domain) for domain in lists["ALLOW"]]
    assert "*" not in allowed
    assert {"github.com", "*.github.com", "*.githubusercontent.com", "*.githubcopilot.com"} <= set(allowed)
    assert {"lambda.<region>.amazonaws.com", "*.efs.<region>.amazonaws.com"} <= set(allowed)
    # The deployment's own names (agent_allowed_domains), and no wider AWS name than the task's own.
    assert {"pypi.org", "files.pythonhosted.org", "*.npmjs.org"} <= set(allowed)
    assert not [name for name in allowed if name in {"*.amazonaws.com", "*.<region>.amazonaws.com", "*.com"}]
    assert len(synthesized.resources("AWS::Route53Resolver::FirewallRuleGroup")) == 1
    # bench/cost.py bills the names the lists hold without the deployment's own (3 here).
    assert len(allowed) + len(lists["BLOCK"]) == cost.DNS_FIREWALL_DOMAINS + 3


def test_nothing_takes_the_agents_lookups_around_the_firewall(synthesized: Synthesized) -> None:
    """What would let an agent task's names bypass the DNS Firewall is not in the template: no
    resolver of the VPC's own choosing (DHCP options, resolver endpoints or forwarding rules, a
    container's DNS servers), and the tasks launched only with the agents' group,
    whose port 443 is the only way out to any address (NFS only to the file system's group)."""
    resources = synthesized.template_json["Resources"]
    for kind in (
        "AWS::EC2::DHCPOptions",
        "AWS::EC2::VPCDHCPOptionsAssociation",
        "AWS::Route53Resolver::ResolverEndpoint",
        "AWS::Route53Resolver::ResolverRule",
        "AWS::Route53Resolver::ResolverRuleAssociation",
    ):
        assert synthesized.resources(kind) == {}, kind
    vpc = resources[synthesized.logical_id(synthesized.stack.agents.vpc)]["Properties"]
    assert vpc.get("EnableDnsSupport", True) is True  # the VPC's resolver (with its firewall) answers
    containers = [
        container
        for body in synthesized.resources("AWS::ECS::TaskDefinition").values()
        for container in body["Properties"]["ContainerDefinitions"]
    ]
    assert containers and not [c for c in containers if c.get("DnsServers") or c.get("DnsSearchDomains")]
    group = synthesized.logical_id(synthesized.stack.agents.security_group)
    assert _router_environment(dict(synthesized.template_json))["AGENT_SECURITY_GROUPS"] == {
        "Fn::GetAtt": [group, "GroupId"]
    }
    nfs = [
        body["Properties"]
        for body in synthesized.resources("AWS::EC2::SecurityGroupEgress").values()
        if body["Properties"]["GroupId"]["Fn::GetAtt"][0] == group
    ]
    assert [sorted(rule) for rule in nfs] == [
        ["Description", "DestinationSecurityGroupId", "FromPort", "GroupId", "IpProtocol", "ToPort"]
    ]
