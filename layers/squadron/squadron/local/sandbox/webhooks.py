"""Webhooks: each change sends the webhook GitHub would send, and is recorded as a delivery.

A payload is shaped like GitHub's published example for its event and action, with the
sandbox's objects laid over it, and signed with the webhook secret (``X-Hub-Signature-256``).
Every delivery is recorded so the App can list and redeliver it; a test may make one lost,
failed or sent twice (:data:`~.base.Fault`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
import urllib.request
import uuid

from squadron.local.sandbox.base import Delivery, Json, Repo, SandboxBase, github_now

logger = logging.getLogger(__name__)


class WebhookOps(SandboxBase):
    def _shape(self, event: str, action: str | None, parts: Json) -> Json:
        """GitHub's example payload for the event with our objects laid over its own."""
        example = json.loads(json.dumps(self.examples.get((event, action)) or {}))
        payload: Json = {**({"action": action} if action else {})}
        for key, value in example.items():
            payload[key] = value
        for key, value in parts.items():
            base = example.get(key)
            payload[key] = {**base, **value} if isinstance(base, dict) and isinstance(value, dict) else value
        if action:
            payload["action"] = action
        return payload

    def emit(self, repo: Repo, event: str, action: str | None, parts: Json, sender: str) -> None:
        payload = self._shape(
            event,
            action,
            {
                **parts,
                "repository": self.repository(repo),
                "sender": self.user(sender if "[bot]" in sender or ":" not in sender else self.bot_login),
                "installation": {"id": self.installation_id, "node_id": f"I_{self.installation_id}"},
            },
        )
        delivery = Delivery(next(self._ids), str(uuid.uuid4()), event, action, payload, github_now())
        self.deliveries.append(delivery)
        self._outbox.put(delivery)

    def _send_webhooks(self) -> None:
        while True:
            delivery = self._outbox.get()
            try:
                if delivery is None:
                    return
                self._deliver(delivery)
            finally:
                self._outbox.task_done()

    def _deliver(self, delivery: Delivery) -> None:
        if not self.webhook_url:
            return
        fault = self.fault(delivery) if self.fault is not None else None
        if fault == "lose":
            delivery.lost = True
            return
        if fault == "fail":
            delivery.status_code = 502
            return
        self._send(self.webhook_url, delivery)
        if fault == "duplicate":
            self._send(self.webhook_url, delivery)

    def _send(self, url: str, delivery: Delivery) -> None:
        delivery.attempts += 1
        body = json.dumps(delivery.payload).encode()
        signature = "sha256=" + hmac.new(self.webhook_secret.encode(), body, hashlib.sha256).hexdigest()
        request = urllib.request.Request(  # noqa: S310 (the configured loopback webhook URL)
            url,
            data=body,
            headers={
                "content-type": "application/json",
                "user-agent": "GitHub-Hookshot/sandbox",
                "x-github-event": delivery.event,
                "x-github-delivery": delivery.guid,
                "x-github-hook-id": "1",
                "x-github-hook-installation-target-id": str(self.app_id),
                "x-github-hook-installation-target-type": "integration",
                "x-hub-signature-256": signature,
            },
        )
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
                delivery.status_code = response.status
        except urllib.error.HTTPError as exc:
            delivery.status_code = exc.code
        except OSError as exc:
            delivery.status_code = 0
            logger.warning("webhook %s %s not delivered: %s", delivery.event, delivery.guid, exc)
        delivery.duration = time.monotonic() - started

    def wait_for_deliveries(self, timeout: float = 10.0) -> None:
        """Until every webhook so far was sent (tests and the demo's pacing)."""
        deadline = time.monotonic() + timeout
        while self._outbox.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)
