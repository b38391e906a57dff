"""What the operator CLI reads and changes in AWS (or the local stack's moto): the deployed
stack's outputs, the registry's agents, the dead-letter queue, the GitHub App's secrets.

Where: a deployed stack, found by name through CloudFormation with boto3's default
credentials and region; or the local stack, found through ``endpoints.json`` in its state
directory (written while it runs). Every failure to reach either is an OperatorError whose
message says what to do.
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

from squadron.adapters.dynamo_memory import DynamoMemory
from squadron.adapters.dynamo_registry import DynamoRegistry
from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.client import GitHubAppClient
from squadron.adapters.github.http import GitHubHttp
from squadron.adapters.pipeline_runs import PipelineRuns
from squadron.adapters.step_functions import Pipelines
from squadron.domain.agents import AgentRecord, AgentStatus, InboxItem
from squadron.domain.change_sets import ChangeSet
from squadron.domain.commands import StartRetrospective
from squadron.domain.events import command_envelope
from squadron.domain.outbox import FailedEffect
from squadron.domain.permissions import Caller
from squadron.errors import SquadronError

ENDPOINTS_FILE = "endpoints.json"

#: What the local stack's moto server is called with: it accepts any credentials, and a plain
#: shell (no AWS profile, no variables) must reach it all the same. Never used for a deployed stack.
LOCAL_STACK_CREDENTIALS = {"aws_access_key_id": "local", "aws_secret_access_key": "local"}
LOCAL_STACK_REGION = "us-east-1"


class OperatorError(SquadronError):
    """The stack cannot be reached or read; the message says why and what to do."""


@dataclass(frozen=True)
class Target:
    """One deployment's registry and queues (``endpoint`` set for the local stack's moto)."""

    table_name: str
    queue_url: str
    dead_letter_queue_url: str
    endpoint: str | None = None
    region: str | None = None
    #: The App, for asking GitHub to redeliver (squadron replay).
    app_id: int | None = None
    private_key_secret: str | None = None
    github_api_url: str = "https://api.github.com"
    #: The secret holding the App's webhook secret (squadron app create stores it there).
    webhook_secret: str | None = None
    #: The log group a rule of the domain event bus writes every event to (squadron events tail).
    event_log_group: str | None = None
    #: The pipelines' state machines' name prefix and their execution role (squadron pipelines).
    pipeline_prefix: str | None = None
    pipeline_role_arn: str | None = None

    def dynamodb(self) -> Any:
        return boto3.client("dynamodb", **self._where())

    def secretsmanager(self) -> Any:
        return boto3.client("secretsmanager", **self._where())

    def sqs(self) -> Any:
        return boto3.client("sqs", **self._where())

    def logs(self) -> Any:
        return boto3.client("logs", **self._where())

    def stepfunctions(self) -> Any:
        return boto3.client("stepfunctions", **self._where())

    def _where(self) -> dict[str, Any]:
        if self.endpoint is None:  # a deployed stack: boto3's credentials and region
            return {"region_name": self.region}
        return {
            "endpoint_url": self.endpoint,
            "region_name": self.region or LOCAL_STACK_REGION,
            **LOCAL_STACK_CREDENTIALS,
        }

    def write(self, state_dir: Path) -> Path:
        path = state_dir / ENDPOINTS_FILE
        path.write_text(json.dumps(asdict(self)), encoding="utf-8")
        return path


def local_target(state_dir: Path) -> Target:
    """The running local stack of ``state_dir``."""
    path = state_dir / ENDPOINTS_FILE
    if not path.exists():
        raise OperatorError(
            f"no local stack is running with state in {state_dir} (start it with `make local`)"
        )
    target = Target(**json.loads(path.read_text(encoding="utf-8")))
    try:
        with urllib.request.urlopen(f"{target.endpoint}/moto-api/", timeout=5):  # noqa: S310 (loopback)
            pass
    except OSError as exc:
        raise OperatorError(
            f"the local stack of {state_dir} does not answer on {target.endpoint} ({exc}); it stopped "
            "without cleaning up: start it again with `make local`"
        ) from exc
    return target


def stack_target(stack_name: str, *, region: str | None = None, found: str = "") -> Target:
    """The deployed stack's registry and queues, from its CloudFormation outputs (``found``: how
    the stack and region were chosen, for the message when there is no such stack)."""
    try:
        cloudformation = boto3.client("cloudformation", region_name=region)
        stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    except NoRegionError as exc:
        raise OperatorError("no AWS region: pass --region or set AWS_REGION") from exc
    except NoCredentialsError as exc:
        raise OperatorError(
            "no AWS credentials: configure them (aws configure, AWS_PROFILE) or use --local"
        ) from exc
    except ClientError as exc:
        message = exc.response.get("Error", {}).get("Message", str(exc))
        if "does not exist" in message:
            raise OperatorError(
                f"no stack {stack_name} in {cloudformation.meta.region_name}"
                + (f" ({found})" if found else "")
                + f": deploy it (make deploy) or pass {'--stage' if found else '--stack'}/--region"
            ) from exc
        raise OperatorError(f"CloudFormation refused DescribeStacks for {stack_name}: {message}") from exc
    except BotoCoreError as exc:
        raise OperatorError(f"cannot reach CloudFormation: {exc}") from exc
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
    wanted = (
        "RegistryTableName",
        "EventsQueueUrl",
        "EventsDeadLetterQueueUrl",
        "GitHubAppPrivateKeySecretName",
    )
    missing = [key for key in wanted if key not in outputs]
    if missing:
        raise OperatorError(f"stack {stack_name} has no output {', '.join(missing)}: is it a Squadron stack?")
    return Target(
        table_name=outputs["RegistryTableName"],
        queue_url=outputs["EventsQueueUrl"],
        dead_letter_queue_url=outputs["EventsDeadLetterQueueUrl"],
        region=cloudformation.meta.region_name,
        app_id=int(outputs.get("GitHubAppId") or 0) or None,
        private_key_secret=outputs["GitHubAppPrivateKeySecretName"],
        webhook_secret=outputs.get("WebhookSecretName"),
        event_log_group=outputs.get("DomainEventsLogGroupName"),
        pipeline_prefix=outputs.get("PipelinePrefix"),
        pipeline_role_arn=outputs.get("PipelineRoleArn"),
    )


class Operations:
    """Reads and the few repairs an operator makes, on one target."""

    def __init__(self, target: Target, *, flags: str = "") -> None:
        self.target = target
        #: The command-line flags naming this target (" --local"): hints repeat them.
        self.flags = flags
        self.registry = DynamoRegistry(target.table_name, client=target.dynamodb())
        self.sqs = target.sqs()

    def _guard(self, what: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return call(*args, **kwargs)
        except (ClientError, BotoCoreError, SquadronError) as exc:
            raise OperatorError(f"{what} failed: {exc}") from exc

    def agents(self, repo: str | None = None) -> list[AgentRecord]:
        found = [
            agent
            for status in AgentStatus
            for agent in self._guard("reading the registry", self.registry.agents_with_status, status)
        ]
        return [a for a in found if repo is None or a.repo_full_name == repo]

    def failed_effects(self, agents: list[AgentRecord]) -> list[FailedEffect]:
        """The effects GitHub refused for good in the repositories of ``agents``, newest first."""
        repos = sorted({agent.repo_id for agent in agents})
        found = [
            effect
            for repo_id in repos
            for effect in self._guard("reading the registry", self.registry.failed_effects, repo_id)
        ]
        return sorted(found, key=lambda f: f.at, reverse=True)

    def repo_id(self, repo: str) -> int:
        """The id of ``repo`` (owner/name), as its agents' records hold it."""
        for agent in self.agents(repo):
            return agent.repo_id
        raise OperatorError(
            f"no agent of {repo} in {self.target.table_name}: its memory is empty (`squadron status{self.flags}` "
            "lists the repositories with agents)"
        )

    def start_retrospective(self, repo: str, *, days: int, since: datetime | None, now: datetime) -> str:
        """Put an operator's StartRetrospective for ``repo`` on events.fifo; its delivery id."""
        agents = self.agents(repo)
        if not agents:
            raise OperatorError(f"no agent of {repo} in {self.target.table_name}: nothing to look back on")
        command = StartRetrospective(trigger="operator", window_end=now, window_start=since, window_days=days)
        delivery = f"retro-operator-{agents[0].repo_id}-{now.strftime('%Y%m%dT%H%M%S%f')}"
        envelope = command_envelope(
            command,
            repository={"id": agents[0].repo_id, "full_name": repo, "default_branch": None},
            installation_id=agents[0].installation_id,
            delivery_id=delivery,
            now=now,
        )
        self._guard(
            "sending to events.fifo",
            self.sqs.send_message,
            QueueUrl=self.target.queue_url,
            MessageBody=envelope.to_message(),
            MessageGroupId=envelope.message_group_id,
            MessageDeduplicationId=delivery,
        )
        return delivery

    def memory_store(self) -> DynamoMemory:
        """The repositories' memory, on the registry's table."""
        return DynamoMemory(self.target.table_name, client=self.registry.client)

    def guarded(self, what: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        """``call`` with AWS failures said as an OperatorError (for the CLI's own services)."""
        return self._guard(what, call, *args, **kwargs)

    def pipeline_runs(self) -> PipelineRuns:
        """The deployment's pipeline runs on Step Functions (squadron pipelines)."""
        if not self.target.pipeline_prefix or not self.target.pipeline_role_arn:
            raise OperatorError(
                "this stack runs no pipelines yet (no PipelinePrefix and PipelineRoleArn): deploy it again"
            )
        pipelines = Pipelines(
            prefix=self.target.pipeline_prefix,
            role_arn=self.target.pipeline_role_arn,
            client=self.target.stepfunctions(),
        )
        return PipelineRuns(pipelines)

    def change_sets(self, limit: int) -> list[ChangeSet]:
        """The newest change sets (docs/change-sets.md), newest first."""
        return list(self._guard("reading the registry", self.registry.change_sets, limit))

    def change_set(self, set_id: str) -> ChangeSet:
        found: ChangeSet | None = self._guard("reading the registry", self.registry.get_change_set, set_id)
        if found is None:
            raise OperatorError(
                f"no change set {set_id} in {self.target.table_name} (`squadron change-sets list{self.flags}` lists them)"
            )
        return found

    def agent(self, agent_id: str) -> tuple[AgentRecord, list[InboxItem]]:
        record = self._guard("reading the registry", self.registry.get_agent, agent_id)
        if record is None:
            raise OperatorError(
                f"no agent {agent_id} in {self.target.table_name} (`squadron status{self.flags}` lists them)"
            )
        return record, self._guard("reading its inbox", self.registry.pending_inbox, agent_id)

    def dead_letters(self, limit: int = 100) -> list[dict[str, Any]]:
        """The DLQ's messages, looked at without taking them (visibility 0)."""
        seen: dict[str, dict[str, Any]] = {}
        for _ in range(max(1, limit // 10) + 1):
            answer = self._guard(
                "reading the dead-letter queue",
                self.sqs.receive_message,
                QueueUrl=self.target.dead_letter_queue_url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=0,
                MessageSystemAttributeNames=["All"],
            )
            messages = answer.get("Messages", [])
            fresh = [m for m in messages if m["MessageId"] not in seen]
            if not fresh:
                break
            for message in fresh:
                seen[message["MessageId"]] = _describe(message)
            if len(seen) >= limit:
                break
        return list(seen.values())[:limit]

    def redrive(self) -> int:
        """Every DLQ message back onto events.fifo (its group, a new deduplication id); the count."""
        moved = 0
        while True:
            answer = self._guard(
                "reading the dead-letter queue",
                self.sqs.receive_message,
                QueueUrl=self.target.dead_letter_queue_url,
                **RECEIVE_TO_RESEND,
            )
            messages = answer.get("Messages", [])
            if not messages:
                return moved
            for message in messages:
                # The original deduplication id may still be inside SQS's 5-minute window.
                again = f"{message['Attributes']['MessageDeduplicationId'][:60]}-redrive-{message['MessageId'][:8]}"
                self._guard(
                    "sending to events.fifo",
                    self.sqs.send_message,
                    QueueUrl=self.target.queue_url,
                    **resend_arguments(message, deduplication_id=again),
                )
                self._guard(
                    "deleting from the dead-letter queue",
                    self.sqs.delete_message,
                    QueueUrl=self.target.dead_letter_queue_url,
                    ReceiptHandle=message["ReceiptHandle"],
                )
                moved += 1

    def store_app_credentials(self, *, private_key: str, webhook_secret: str | None) -> None:
        """A new App's private key and webhook secret as the current values of the stack's secrets
        (PutSecretValue only: the secrets are the stack's, created by ``cdk deploy``)."""
        target = self.target
        if target.private_key_secret is None or target.webhook_secret is None:
            raise OperatorError(
                "the stack does not name its GitHub App secrets (outputs GitHubAppPrivateKeySecretName "
                "and WebhookSecretName): deploy the current version first"
            )
        secrets = target.secretsmanager()
        self._guard(
            f"storing the App's private key in {target.private_key_secret}",
            secrets.put_secret_value,
            SecretId=target.private_key_secret,
            SecretString=private_key,
        )
        if webhook_secret is not None:
            self._guard(
                f"storing the App's webhook secret in {target.webhook_secret}",
                secrets.put_secret_value,
                SecretId=target.webhook_secret,
                SecretString=webhook_secret,
            )

    def replay(self, delivery: str) -> dict[str, Any]:
        """Ask GitHub to send a webhook delivery again (by its GUID or numeric id); the delivery."""
        target = self.target
        if target.app_id is None or target.private_key_secret is None:
            raise OperatorError(
                "the stack does not know its GitHub App yet: squadron configure --github-app-id ID "
                "--github-app-slug SLUG, then make deploy"
            )
        secrets = target.secretsmanager()

        def private_key() -> str:
            value = self._guard(
                "reading the App's private key", secrets.get_secret_value, SecretId=target.private_key_secret
            )
            return str(value["SecretString"])

        app = GitHubApp(
            app_id=target.app_id, http=GitHubHttp(base_url=target.github_api_url), private_key=private_key
        )
        client = GitHubAppClient(http=app.http, jwt=app.jwt, app_id=target.app_id, caller=Caller.framework())
        deliveries = self._guard("listing the App's deliveries", client.list_deliveries)
        found = next((d for d in deliveries if delivery in (str(d.get("id")), str(d.get("guid")))), None)
        if found is None:
            raise OperatorError(f"no delivery {delivery} among the App's newest {len(deliveries)} deliveries")
        self._guard("asking GitHub to redeliver", client.redeliver, int(found["id"]))
        return dict(found)


#: ReceiveMessage's arguments for messages to send again: every attribute resend_arguments
#: needs, ten at a time, hidden for a minute while they are moved.
RECEIVE_TO_RESEND: dict[str, Any] = {
    "MaxNumberOfMessages": 10,
    "VisibilityTimeout": 60,
    "MessageSystemAttributeNames": ["All"],
    "MessageAttributeNames": ["All"],
}


def resend_arguments(message: dict[str, Any], *, deduplication_id: str | None = None) -> dict[str, Any]:
    """SendMessage's arguments that put a received FIFO message back as it was (its body, group,
    attributes; its deduplication id unless another is given). Receive it with
    ``MessageSystemAttributeNames=["All"]`` and ``MessageAttributeNames=["All"]``."""
    attributes = message.get("Attributes", {})
    return {
        "MessageBody": message["Body"],
        "MessageGroupId": attributes["MessageGroupId"],
        "MessageDeduplicationId": deduplication_id or attributes["MessageDeduplicationId"],
        **({"MessageAttributes": message["MessageAttributes"]} if message.get("MessageAttributes") else {}),
    }


def _describe(message: dict[str, Any]) -> dict[str, Any]:
    attributes = message.get("Attributes", {})
    try:
        body = json.loads(message.get("Body") or "{}")
    except json.JSONDecodeError:
        body = {}
    event = ".".join(str(part) for part in (body.get("event"), body.get("action")) if part) or "?"
    sent = attributes.get("SentTimestamp")
    return {
        "message_id": message["MessageId"],
        "group": attributes.get("MessageGroupId"),
        "delivery_id": body.get("delivery_id") or attributes.get("MessageDeduplicationId"),
        "event": event,
        "receive_count": int(attributes.get("ApproximateReceiveCount", 0)),
        "sent_at": datetime.fromtimestamp(int(sent) / 1000, UTC).isoformat() if sent else None,
    }
