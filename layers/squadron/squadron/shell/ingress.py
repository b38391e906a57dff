"""The ingress shell: load the secret, triage the request, enqueue, answer.

The ingress answers 2xx only once the event is on the queue, and fails closed:
no readable secret means every request is refused with a 500, never accepted.
A stack deployed before its GitHub App exists (GITHUB_APP_ID 0) answers pings but
accepts no event: each is refused with a 503, which GitHub records as a failed
delivery, and the reconciler has GitHub redeliver it once the stack knows its App.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from squadron.adapters.errors import QueueUnavailableError, SecretUnavailableError
from squadron.adapters.secrets import SecretsManagerSource
from squadron.adapters.sqs import SqsEventQueue
from squadron.domain.webhook import Accepted, AppIdentity, Dropped, Pong, Rejected, triage_webhook

if TYPE_CHECKING:
    # The ports module imports every domain model; the ingress needs two Protocols. The
    # settings' pydantic models are built on the first request, when they are first used.
    from squadron.ports import EventQueue, SecretSource
    from squadron.settings import IngressSettings


@dataclass(frozen=True)
class IngressOutcome:
    """What the handler answers, and what it counts.

    ``outcome`` is one of accepted, dropped, pong, rejected, failed; ``code`` is a
    short machine-readable reason used as a metric dimension.
    """

    status_code: int
    outcome: str
    code: str
    body: dict[str, Any] = field(default_factory=dict)
    delivery_id: str | None = None


def _unconfigured_app_id() -> int:
    from squadron.settings import UNCONFIGURED_APP_ID  # noqa: PLC0415 (loaded with the settings)

    return UNCONFIGURED_APP_ID


def _now() -> datetime:
    return datetime.now(UTC)


class WebhookIngress:
    def __init__(
        self,
        settings: IngressSettings,
        *,
        queue: EventQueue,
        secrets: SecretSource,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.settings = settings
        self.queue = queue
        self.secrets = secrets
        self.clock = clock
        self.app = AppIdentity(app_id=settings.github_app_id, slug=settings.github_app_slug)
        self.app_configured = settings.github_app_id != _unconfigured_app_id()

    def handle(self, headers: Mapping[str, str], body: bytes) -> IngressOutcome:
        try:
            secret = self.secrets.get(self.settings.webhook_secret_arn)
        except SecretUnavailableError as exc:
            return IngressOutcome(
                500,
                "failed",
                "secret_unavailable",
                {"status": "error", "reason": f"webhook secret unavailable, refusing all deliveries: {exc}"},
            )
        decision = triage_webhook(
            headers=headers,
            body=body,
            secret=secret,
            app=self.app,
            max_body_bytes=self.settings.max_body_bytes,
            received_at=self.clock(),
        )
        match decision:
            case Rejected(status=status, code=code, reason=reason):
                return IngressOutcome(status, "rejected", code, {"status": "rejected", "reason": reason})
            case Pong(delivery_id=delivery_id, zen=zen, hook_id=hook_id):
                return IngressOutcome(
                    200, "pong", "ping", {"status": "pong", "zen": zen, "hook_id": hook_id}, delivery_id
                )
            case Dropped(delivery_id=delivery_id, code=code, reason=reason):
                return IngressOutcome(
                    202, "dropped", code, {"status": "dropped", "reason": reason}, delivery_id
                )
            case Accepted(envelope=envelope) if not self.app_configured:
                return IngressOutcome(
                    503,
                    "failed",
                    "app_not_configured",
                    {
                        "status": "error",
                        "reason": "this stack does not know its GitHub App yet (deployed with github_app_id 0): "
                        "deploy it with the App's id; GitHub keeps this delivery as failed and it is "
                        "redelivered then",
                    },
                    envelope.delivery_id,
                )
            case Accepted(envelope=envelope):
                try:
                    message_id = self.queue.send(envelope)
                except QueueUnavailableError as exc:
                    # 5xx: GitHub records the delivery as failed, so it can be redelivered.
                    return IngressOutcome(
                        503,
                        "failed",
                        "queue_unavailable",
                        {"status": "error", "reason": f"the event could not be queued: {exc}"},
                        envelope.delivery_id,
                    )
                return IngressOutcome(
                    202,
                    "accepted",
                    envelope.event,
                    {
                        "status": "accepted",
                        "delivery": envelope.delivery_id,
                        "group": envelope.message_group_id,
                        "message_id": message_id,
                    },
                    envelope.delivery_id,
                )
        raise AssertionError(f"unhandled decision {decision!r}")  # pragma: no cover


def build_ingress(environ: Mapping[str, str] | None = None) -> WebhookIngress:
    """Wire the ingress to AWS from its environment (see :class:`IngressSettings`)."""
    from squadron.settings import IngressSettings, load_settings  # noqa: PLC0415 (see above)

    settings = load_settings(IngressSettings, environ)
    return WebhookIngress(
        settings,
        queue=SqsEventQueue(settings.events_queue_url),
        secrets=SecretsManagerSource(max_age=settings.secret_cache_seconds),
    )
