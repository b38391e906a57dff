"""What a deploy needs, judged from what `squadron doctor` read — pure.

Each check ends in one :class:`Finding`: one line that says what is there, or what is missing
and what to do about it. ``blocks_deploy`` marks what would make `cdk deploy` fail (or leave a
stack that cannot start); the rest is what the running stack needs before it can work.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Status = Literal["ok", "warn", "missing", "skip"]

#: Bootstrap version below which CDK's synthesized templates refuse to deploy (their
#: CheckBootstrapVersion rule rejects 1-5).
MIN_BOOTSTRAP_VERSION = 6
#: The default bootstrap qualifier, whose version CDK keeps in this SSM parameter.
BOOTSTRAP_VERSION_PARAMETER = "/cdk-bootstrap/hnb659fds/version"
#: Executions the ingress must find free to answer GitHub, which waits 10 s and never re-sends a
#: delivery that was refused: two, so that two webhooks arriving together are both taken.
INGRESS_ROOM = 2
#: Service Quotas: "Fargate On-Demand vCPU resource count"; Lambda's concurrent executions.
FARGATE_VCPU_QUOTA = ("fargate", "L-3032A538")
LAMBDA_CONCURRENCY_QUOTA = ("lambda", "L-B99A9384")
#: The router's function (its logical id without CDK's hash) and the least MaximumConcurrency SQS
#: accepts: what `router_max_concurrency` can lower the router's share of the budget to.
ROUTER_FUNCTION = "RouterFunction"
MIN_ROUTER_CONCURRENCY = 2
#: Below this many agents at once, a team's work queues up (a PM, a developer and a reviewer).
FEW_AGENTS = 3

_GITHUB_TOKEN = re.compile(r"^(gh[opusr]_[A-Za-z0-9_]{20,}|github_pat_[A-Za-z0-9_]{20,})$")
_PEM = re.compile(r"-----BEGIN (RSA )?PRIVATE KEY-----.+-----END (RSA )?PRIVATE KEY-----", re.S)


@dataclass(frozen=True)
class Finding:
    status: Status
    check: str
    detail: str
    blocks_deploy: bool = False

    @property
    def line(self) -> str:
        return f"{self.status:<7} {self.check}: {self.detail}"


def failed(findings: Iterable[Finding], *, before_deploy: bool = False) -> list[Finding]:
    """What is missing (before a deploy: only what would make it fail)."""
    return [f for f in findings if f.status == "missing" and (f.blocks_deploy or not before_deploy)]


def judge_bootstrap(version: int | None, account: str, region: str) -> Finding:
    bootstrap = f"npx cdk bootstrap aws://{account}/{region}"
    if version is None:
        return Finding(
            "missing",
            "CDK bootstrap",
            f"{region} is not bootstrapped (no {BOOTSTRAP_VERSION_PARAMETER}): {bootstrap}",
            True,
        )
    if version < MIN_BOOTSTRAP_VERSION:
        return Finding(
            "missing",
            "CDK bootstrap",
            f"version {version} in {region} is older than {MIN_BOOTSTRAP_VERSION}: {bootstrap} again",
            True,
        )
    return Finding("ok", "CDK bootstrap", f"version {version} in {region}")


@dataclass(frozen=True)
class Draw:
    """One consumer of the account's unreserved Lambda concurrency: at most ``executions`` at once
    (None: no bound)."""

    function: str
    source: str
    executions: int | None

    @property
    def text(self) -> str:
        return f"{self.function} {self.executions if self.executions is not None else 'unbounded'} ({self.source})"


@dataclass(frozen=True)
class ConcurrencyBudget:
    """What a synthesized template lets its functions take at once, read from the template itself:
    its event source mappings, its scheduled and event rules, the function API Gateway invokes
    (the ingress) and the one agent tasks invoke (the gateway, one call at a time per task)."""

    draws: tuple[Draw, ...]
    ingress: str | None
    gateway: str | None

    @property
    def bounded(self) -> int:
        return sum(d.executions or 0 for d in self.draws)

    @property
    def unbounded(self) -> list[Draw]:
        return [d for d in self.draws if d.executions is None]


_HASH = re.compile(r"[0-9A-F]{8}$")


def _function_name(logical_id: str) -> str:
    """A function's logical id without CDK's hash: RouterFunction0F681190 -> RouterFunction."""
    return _HASH.sub("", logical_id) or logical_id


def _referenced(value: Any) -> str | None:
    """The logical id a {"Ref": X} or {"Fn::GetAtt": [X, "Arn"]} names."""
    if isinstance(value, Mapping):
        if isinstance(value.get("Ref"), str):
            return str(value["Ref"])
        attribute = value.get("Fn::GetAtt")
        if isinstance(attribute, list) and attribute and isinstance(attribute[0], str):
            return attribute[0]
    return None


#: A partition's throughput (DynamoDB's documented limits: 1,000 write and 3,000 read units a
#: second); a stream has one open shard per partition of its table.
PARTITION_WRITE_UNITS = 1000
PARTITION_READ_UNITS = 3000
#: A new on-demand table's throughput (4,000 writes and 12,000 reads a second, DynamoDB's
#: documented initial and default warm throughput): four partitions, so four stream shards.
ON_DEMAND_WARM_THROUGHPUT = (4000, 12000)
#: A Kinesis stream in on-demand mode starts with 4 MB/s of writes: four shards.
KINESIS_ON_DEMAND_SHARDS = 4


def stream_shards(resource: Mapping[str, Any]) -> int | None:
    """The shards of the stream ``resource`` (a DynamoDB table's or a Kinesis stream) has when
    created, from its template properties; None when the template does not fix them. A DynamoDB
    stream has a shard per partition: the table's warm throughput (or provisioned capacity, or a
    new on-demand table's 4,000 writes and 12,000 reads) over one partition's. Partitions split
    as the table grows, never merge: this is the least the stream takes."""
    kind, properties = resource.get("Type"), resource.get("Properties", {})
    if kind == "AWS::Kinesis::Stream":
        mode = properties.get("StreamModeDetails", {}).get("StreamMode", "PROVISIONED")
        count = properties.get("ShardCount")
        if mode == "ON_DEMAND":
            return KINESIS_ON_DEMAND_SHARDS
        return int(count) if isinstance(count, int | str) and str(count).isdigit() else None
    if kind not in ("AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable"):
        return None
    warm = properties.get("WarmThroughput") or {}
    provisioned = properties.get("ProvisionedThroughput") or {}
    if warm:
        writes = int(warm.get("WriteUnitsPerSecond", 0))
        reads = int(warm.get("ReadUnitsPerSecond", 0))
    elif properties.get("BillingMode") == "PAY_PER_REQUEST":
        writes, reads = ON_DEMAND_WARM_THROUGHPUT
    elif provisioned:
        writes = int(provisioned.get("WriteCapacityUnits", 0))
        reads = int(provisioned.get("ReadCapacityUnits", 0))
    else:
        return None
    return max(1, -(-writes // PARTITION_WRITE_UNITS), -(-reads // PARTITION_READ_UNITS))


def concurrency_budget(template: Mapping[str, Any]) -> ConcurrencyBudget:
    """Every draw on the account's Lambda concurrency that ``template`` fixes."""
    resources: Mapping[str, Any] = template.get("Resources", {})
    functions = {name for name, r in resources.items() if r.get("Type") == "AWS::Lambda::Function"}
    draws: list[Draw] = []
    ingress = gateway = None
    for name, resource in resources.items():
        kind, properties = resource.get("Type"), resource.get("Properties", {})
        if kind == "AWS::Lambda::EventSourceMapping":
            function = _referenced(properties.get("FunctionName")) or name
            if "StartingPosition" in properties:  # a stream: ParallelizationFactor batches per shard
                factor = int(properties.get("ParallelizationFactor", 1))
                stream = _referenced(properties.get("EventSourceArn"))
                shards = stream_shards(resources.get(stream, {})) if stream else None
                draws.append(
                    Draw(
                        _function_name(function),
                        f"stream of {_function_name(stream) if stream else 'a table outside the template'}: "
                        + (f"{shards} shards" if shards else "shards not in the template")
                        + f" x ParallelizationFactor {factor}",
                        None if shards is None else shards * factor,
                    )
                )
            else:
                maximum = properties.get("ScalingConfig", {}).get("MaximumConcurrency")
                source = (
                    "queue, MaximumConcurrency" if maximum is not None else "queue without MaximumConcurrency"
                )
                draws.append(
                    Draw(_function_name(function), source, None if maximum is None else int(maximum))
                )
        elif kind == "AWS::Events::Rule":
            for target in properties.get("Targets", []):
                invoked = _referenced(target.get("Arn"))
                if invoked in functions:
                    scheduled = "ScheduleExpression" in properties
                    # A schedule whose runs end before the next tick runs one at a time; events
                    # invoke a function as often as they come.
                    draws.append(
                        Draw(
                            _function_name(invoked),
                            "schedule" if scheduled else "event rule",
                            1 if scheduled else None,
                        )
                    )
        elif kind == "AWS::Lambda::Permission" and properties.get("Principal") == "apigateway.amazonaws.com":
            ingress = _referenced(properties.get("FunctionName"))
        elif kind == "AWS::ECS::TaskDefinition":
            for container in properties.get("ContainerDefinitions", []):
                for variable in container.get("Environment", []):
                    if variable.get("Name") == "AGENT_GATEWAY_FUNCTION":
                        gateway = _referenced(variable.get("Value"))
    return ConcurrencyBudget(
        tuple(sorted(draws, key=lambda d: d.function)),
        _function_name(ingress) if ingress else None,
        _function_name(gateway) if gateway else None,
    )


def judge_lambda_concurrency(
    limit: int, unreserved: int, budget: ConcurrencyBudget, agents: int | None
) -> Finding:
    """Whatever every event source, schedule and agent may take at once, the ingress must still find
    :data:`INGRESS_ROOM` executions: GitHub does not re-send a webhook that was throttled."""
    quota = f"ask AWS for more (Service Quotas: lambda {LAMBDA_CONCURRENCY_QUOTA[1]})"
    check = "Lambda concurrency"
    if budget.unbounded:
        return Finding(
            "missing",
            check,
            f"{', '.join(d.text for d in budget.unbounded)}: may take every execution and leave the ingress "
            "none (give the event source a MaximumConcurrency)",
            True,
        )
    taken = "; ".join(d.text for d in budget.draws)
    left = unreserved - budget.bounded
    if left < INGRESS_ROOM:
        router = next((d.executions for d in budget.draws if d.function == ROUTER_FUNCTION), None)
        lowered = None if router is None else router - (INGRESS_ROOM - left)
        remedy = (
            f"lower router_max_concurrency (squadron configure --set router_max_concurrency={lowered}) or {quota}"
            if lowered is not None and lowered >= MIN_ROUTER_CONCURRENCY
            else f"no router_max_concurrency makes room ({MIN_ROUTER_CONCURRENCY} is the least SQS allows): {quota}"
        )
        return Finding(
            "missing",
            check,
            f"{unreserved} of {limit} unreserved, {budget.bounded} taken at most by {taken}: "
            f"{max(left, 0)} left for the ingress, {INGRESS_ROOM} needed; {remedy}",
            True,
        )
    gateway = f"{budget.gateway or 'the agent gateway'} (one call at a time per agent task)"
    if agents is not None and left - agents < INGRESS_ROOM:
        return Finding(
            "warn",
            check,
            f"{unreserved} of {limit} unreserved, {budget.bounded} taken at most by {taken}; {agents} agent "
            f"tasks at once calling {gateway} would leave the ingress {max(left - agents, 0)} of the "
            f"{INGRESS_ROOM} it needs, and GitHub does not re-send a refused webhook: {quota}",
        )
    agents_text = f", up to {agents} by {gateway}" if agents is not None else ""
    return Finding(
        "ok",
        check,
        f"{unreserved} of {limit} unreserved: at most {budget.bounded} taken by {taken}{agents_text}; "
        f"{left - (agents or 0)} stay free for the ingress",
    )


def judge_fargate(vcpus: float | None, task_vcpus: float) -> Finding:
    code = f"Service Quotas: fargate {FARGATE_VCPU_QUOTA[1]}"
    if vcpus is None:
        return Finding(
            "warn", "Fargate vCPU quota", f"could not be read ({code}); agents need {task_vcpus:g} vCPU each"
        )
    agents = int(vcpus // task_vcpus)
    if agents < 1:
        return Finding(
            "missing",
            "Fargate vCPU quota",
            f"{vcpus:g} vCPU: no agent task ({task_vcpus:g} vCPU) can start; ask AWS for more ({code})",
            True,
        )
    if agents < FEW_AGENTS:
        return Finding(
            "warn",
            "Fargate vCPU quota",
            f"{vcpus:g} vCPU: {agents} agent task(s) at once; more wait their turn ({code})",
        )
    return Finding("ok", "Fargate vCPU quota", f"{vcpus:g} vCPU: up to {agents} agent tasks at once")


#: ECS's service-linked role: created on an account's first use of ECS, not always ready in time
#: for its first cluster (FINDINGS), so the stack creates it before the cluster.
ECS_SERVICE_ROLE = "AWSServiceRoleForECS"


def judge_ecs_service_role(exists: bool) -> Finding:
    if exists:
        return Finding("ok", "ECS service role", f"{ECS_SERVICE_ROLE} exists")
    return Finding(
        "ok",
        "ECS service role",
        f"{ECS_SERVICE_ROLE} does not exist yet (this account's first ECS cluster): the stack creates it "
        'before its cluster, so the first deploy does not roll back on "Unable to assume the service '
        'linked role"',
    )


def judge_private_key(value: str, secret: str, kept: str | None = None) -> Finding:
    """``kept``: the key file `squadron app create` wrote for this stage, when there is one."""
    if _PEM.search(value):
        return Finding("ok", "App private key", f"{secret} holds a PEM private key")
    if kept:
        return Finding(
            "missing",
            "App private key",
            f"{secret} holds its placeholder, not a PEM key; squadron app create kept the App's key in {kept}: "
            f"aws secretsmanager put-secret-value --secret-id {secret} --secret-string file://{kept}",
        )
    return Finding(
        "missing",
        "App private key",
        f"{secret} holds its placeholder, not a PEM key: squadron app create --stack ..., or "
        f"aws secretsmanager put-secret-value --secret-id {secret} --secret-string file://app.pem",
    )


def judge_webhook_secret(value: str, secret: str) -> Finding:
    if value.strip():
        return Finding("ok", "webhook secret", f"{secret} is set (the App's webhook must use the same)")
    return Finding("missing", "webhook secret", f"{secret} is empty: every webhook is refused")


def judge_copilot_token(value: str, secret: str) -> Finding:
    if _GITHUB_TOKEN.match(value.strip()):
        return Finding("ok", "Copilot token", f"{secret} holds a GitHub token")
    return Finding(
        "warn",
        "Copilot token",
        f"{secret} holds its placeholder: roles whose model Copilot serves cannot start (BYOK roles can); "
        f"aws secretsmanager put-secret-value --secret-id {secret} --secret-string <token with a Copilot seat>",
    )


def judge_webhook(url: str, status: int | None, reason: str) -> Finding:
    """An unsigned request must be refused by the ingress itself (401): the route, the function and
    its secret all work. Anything else says where it breaks."""
    if status == 401:
        return Finding("ok", "webhook URL", f"{url} answers (401 to an unsigned request, as it should)")
    if status is None:
        return Finding("missing", "webhook URL", f"{url} does not answer: {reason}")
    return Finding(
        "missing", "webhook URL", f"{url} answered {status} to an unsigned request (401 expected): {reason}"
    )
