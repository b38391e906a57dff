"""The secrets the operator fills: the App's webhook secret and private key, and the agents' Copilot token."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

_ROTATION_REASON = (
    "The value is issued by GitHub (App settings) and rotated there; Secrets Manager cannot "
    "rotate it, so the operator stores each new value with put-secret-value."
)


class GitHubAppSecrets(Construct):
    """Secrets the operator fills from the GitHub App's settings page.

    The webhook secret is generated here (paste it into the App's webhook settings);
    the private key secret starts as a random placeholder until the App's PEM key is
    stored in it. Both are retained when the stack is deleted.
    """

    WEBHOOK_SECRET_LENGTH = 48

    def __init__(self, scope: Construct, construct_id: str, *, stage: str) -> None:
        super().__init__(scope, construct_id)
        self.webhook_secret = self._build_webhook_secret(stage)
        self.private_key = self._build_private_key(stage)
        self.copilot_token = self._build_copilot_token(stage)

    def _build_webhook_secret(self, stage: str) -> secretsmanager.Secret:
        secret = secretsmanager.Secret(
            self,
            "WebhookSecret",
            secret_name=f"squadron/{stage}/webhook-secret",
            description="Squadron: HMAC secret of the GitHub App's webhook (X-Hub-Signature-256)",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=self.WEBHOOK_SECRET_LENGTH, exclude_punctuation=True
            ),
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        _acknowledge_rotation(secret)
        return secret

    def _build_private_key(self, stage: str) -> secretsmanager.Secret:
        secret = secretsmanager.Secret(
            self,
            "GitHubAppPrivateKey",
            secret_name=f"squadron/{stage}/github-app-private-key",
            description="Squadron: PEM private key of the GitHub App (placeholder until stored)",
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        _acknowledge_rotation(secret)
        return secret

    def _build_copilot_token(self, stage: str) -> secretsmanager.Secret:
        secret = secretsmanager.Secret(
            self,
            "CopilotToken",
            secret_name=f"squadron/{stage}/copilot-token",
            description=(
                "Squadron: GitHub token with a Copilot seat, for agents whose model is served by Copilot "
                "(placeholder until stored; roles with a BYOK provider do not use it)"
            ),
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        _acknowledge_rotation(secret)
        return secret


def _acknowledge_rotation(secret: secretsmanager.Secret) -> None:
    cdk.Validations.of(secret).acknowledge(
        cdk.Acknowledgment(id="AwsSolutions-SMG4", reason=_ROTATION_REASON)
    )
