"""The agents' egress allow list: Route 53 Resolver DNS Firewall on the agents' VPC.

Fargate gives a task no NET_ADMIN, so no iptables or proxy inside it (FINDINGS "Fargate
capabilities"): what an agent task may reach by name is decided by the VPC's resolver. One rule
group on the VPC answers the names agents need (GitHub, the Copilot model service, the AWS
endpoints a task's own platform and host use, and the deployment's ``agent_allowed_domains``:
package registries, a BYOK provider) and NXDOMAIN for every other name. The security group
(AgentCompute) lets out only HTTPS, and NFS to the file system, so a task cannot ask another
resolver on port 53 either. What remains (docs/security.md, "Threat model"): a connection to an address the
agent already knows (or resolves over HTTPS from a resolver it knows by address) is not a name
lookup, and the firewall never sees it.

The list is deployment-wide because the VPC is: a repository's package registries are named by
the operator (``squadron configure --set agent_allowed_domains=...``), never by a repository's
own configuration, which a writer of one repository could otherwise use to open the network of
every other repository's agents.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_route53resolver as route53resolver
from constructs import Construct

#: GitHub (the API, git over HTTPS, raw and release content) and the Copilot model service.
#: ``*.name`` matches every subdomain of ``name`` (any depth), not ``name`` itself.
GITHUB_DOMAINS = (
    "github.com",
    "*.github.com",
    "*.githubusercontent.com",
    "githubcopilot.com",
    "*.githubcopilot.com",
)


def aws_domains(region: str) -> tuple[str, ...]:
    """The AWS endpoints an agent task resolves in its own region: the agent gateway (Lambda), the
    file system's mount target, the image (ECR and its S3 layer bucket) and its logs."""
    return (
        f"lambda.{region}.amazonaws.com",
        f"*.efs.{region}.amazonaws.com",
        f"api.ecr.{region}.amazonaws.com",
        f"*.dkr.ecr.{region}.amazonaws.com",
        f"prod-{region}-starport-layer-bucket.s3.{region}.amazonaws.com",
        f"logs.{region}.amazonaws.com",
    )


#: Rule priorities: the allow list first, then the block-all rule for every other name.
ALLOW_PRIORITY = 100
BLOCK_PRIORITY = 200
#: Where the rule group sits among other rule groups associated with the VPC (100-9900).
ASSOCIATION_PRIORITY = 101


class EgressAllowList(Construct):
    """A DNS Firewall rule group on ``vpc``: the allowed names resolve, every other name is NXDOMAIN."""

    def __init__(
        self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc, extra_domains: Sequence[str] = ()
    ) -> None:
        super().__init__(scope, construct_id)
        region = cdk.Stack.of(self).region
        self.domains = [*GITHUB_DOMAINS, *aws_domains(region), *extra_domains]
        self.allowed = route53resolver.CfnFirewallDomainList(self, "Allowed", domains=self.domains)
        self.everything = route53resolver.CfnFirewallDomainList(self, "Everything", domains=["*"])
        self.rule_group = route53resolver.CfnFirewallRuleGroup(
            self,
            "Rules",
            firewall_rules=[
                route53resolver.CfnFirewallRuleGroup.FirewallRuleProperty(
                    action="ALLOW", priority=ALLOW_PRIORITY, firewall_domain_list_id=self.allowed.attr_id
                ),
                route53resolver.CfnFirewallRuleGroup.FirewallRuleProperty(
                    action="BLOCK",
                    priority=BLOCK_PRIORITY,
                    firewall_domain_list_id=self.everything.attr_id,
                    block_response="NXDOMAIN",
                ),
            ],
        )
        self.association = route53resolver.CfnFirewallRuleGroupAssociation(
            self,
            "OnAgentsVpc",
            firewall_rule_group_id=self.rule_group.attr_id,
            vpc_id=vpc.vpc_id,
            priority=ASSOCIATION_PRIORITY,
        )
