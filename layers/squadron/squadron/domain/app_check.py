"""Does the deployed App work? Judged from what GitHub answered the App itself — pure.

`squadron doctor` signs in as the App with the private key the stack holds (an RS256 JWT whose
``iss`` is the configured id) and asks GitHub: ``GET /app`` (the key is this App's, the id and
slug are the configured ones, its permissions and events cover the manifest's),
``GET /repos/{owner}/{repo}/installation`` for each repository named (installed there, with every
permission accepted), ``GET /app/hook/config`` and the App's latest webhook deliveries (the hook
posts to the stack's WebhookUrl, and the ingress accepted what GitHub signed: the secret the stack
holds is the one the App was given). Each judgement is one :class:`Finding`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from squadron.domain.preflight import Finding

_LEVELS = {"read": 1, "write": 2, "admin": 3}


@dataclass(frozen=True)
class AppSeen:
    """What ``GET /app`` answered (GitHub's ``integration``)."""

    id: str
    slug: str
    permissions: Mapping[str, str]
    events: Sequence[str]


@dataclass(frozen=True)
class DeliverySeen:
    """One of the App's webhook deliveries, as ``GET /app/hook/deliveries`` lists it."""

    event: str
    status_code: int
    delivered_at: str


def judge_identity(app_id: str, slug: str, seen: AppSeen | None, refusal: str, secret: str) -> Finding:
    """``seen`` None: GitHub refused the JWT (``refusal`` says how)."""
    check = "App identity"
    if seen is None:
        return Finding(
            "missing",
            check,
            f"GitHub refused the App's JWT (iss {app_id}, signed with the key in {secret}): {refusal}; the "
            f"key is not App {app_id}'s, or {app_id} is another App's id (a key from the App's settings page "
            f"into {secret}, or squadron configure --github-app-id)",
        )
    if seen.id != app_id:
        return Finding(
            "missing", check, f"GitHub signed us in as App {seen.id}, the deployment says {app_id}"
        )
    if seen.slug != slug:
        return Finding(
            "missing",
            check,
            f"App {app_id} is {seen.slug!r} on GitHub, the deployment says {slug!r}: the functions would "
            f"not know {seen.slug}[bot]'s own doings (squadron configure --github-app-slug {seen.slug}, "
            "then make deploy)",
        )
    return Finding("ok", check, f"signed in as App {app_id} ({slug}) with the stored key")


def lacking(granted: Mapping[str, str], wanted: Mapping[str, str]) -> list[str]:
    """``name: level`` for each wanted permission ``granted`` lacks or gives at a lower level."""
    return [
        f"{name}: {level}"
        for name, level in sorted(wanted.items())
        if _LEVELS.get(granted.get(name, ""), 0) < _LEVELS[level]
    ]


def judge_grants(seen: AppSeen, wanted: Mapping[str, str], events: Sequence[str]) -> Finding:
    """The App's permissions and events against the manifest's (`squadron app manifest`)."""
    check = "App permissions"
    missing = lacking(seen.permissions, wanted)
    unsubscribed = sorted(set(events) - set(seen.events))
    if missing or unsubscribed:
        parts = []
        if missing:
            parts.append(f"lacks {', '.join(missing)}")
        if unsubscribed:
            parts.append(f"is not subscribed to {', '.join(unsubscribed)}")
        return Finding(
            "missing",
            check,
            f"App {seen.slug} {' and '.join(parts)} (the manifest's; the App's settings → Permissions & "
            "events, then each installation accepts them)",
        )
    return Finding("ok", check, f"{len(wanted)} permissions and {len(events)} events, as the manifest asks")


def judge_installation(
    repository: str, installation: Mapping[str, object] | None, wanted: Mapping[str, str]
) -> Finding:
    """``installation`` None: the App is not installed on ``repository``."""
    check = f"installation on {repository}"
    if installation is None:
        return Finding(
            "missing",
            check,
            "the App is not installed there, or not for this repository (the App's page → Install App)",
        )
    granted = installation.get("permissions")
    missing = lacking(granted if isinstance(granted, Mapping) else {}, wanted)
    number = installation.get("id")
    if missing:
        return Finding(
            "missing",
            check,
            f"installation {number} has not accepted {', '.join(missing)} (its owner accepts the App's new "
            "permissions on the installation's settings page)",
        )
    if installation.get("suspended_at"):
        return Finding("missing", check, f"installation {number} is suspended")
    return Finding("ok", check, f"installation {number} with every permission the App asks for")


def judge_hook(
    hook: Mapping[str, object],
    webhook_url: str,
    deliveries: Sequence[DeliverySeen],
    *,
    secret: str,
    generated: bool,
) -> Finding:
    """Whether GitHub's webhook reaches the stack with the secret it holds.

    ``hook`` is ``GET /app/hook/config``; ``deliveries`` the App's latest, newest first;
    ``generated``: the secret ``secret`` still holds the value the stack generated (its only
    version), not one stored after the App was created.
    """
    check = "App webhook"
    if hook.get("url") != webhook_url:
        return Finding(
            "missing",
            check,
            f"the App's webhook posts to {hook.get('url') or 'nothing'}, the stack's WebhookUrl is {webhook_url} "
            "(the App's settings → Webhook URL)",
        )
    if not hook.get("secret"):
        return Finding(
            "missing",
            check,
            "the App's webhook has no secret: GitHub signs nothing and the ingress refuses every delivery",
        )
    signed = [d for d in deliveries if d.event != "ping"] or list(deliveries)
    if signed:
        last = signed[0]
        if last.status_code == 401:
            return Finding(
                "missing",
                check,
                f"GitHub's latest delivery ({last.event}, {last.delivered_at}) was refused with 401: {secret} "
                "does not hold the App's webhook secret (squadron app create --replace, or the same value in "
                "both places)",
            )
        if 200 <= last.status_code < 300:
            return Finding(
                "ok",
                check,
                f"posts to the WebhookUrl; the latest delivery ({last.event}) was accepted, signed with the "
                f"secret in {secret}",
            )
        return Finding(
            "warn",
            check,
            f"GitHub's latest delivery ({last.event}, {last.delivered_at}) got {last.status_code}: the "
            "ingress's log group says why",
        )
    if generated:
        return Finding(
            "warn",
            check,
            f"{secret} still holds the placeholder the stack generated and GitHub has delivered nothing yet: "
            "unless that value was pasted into the App's webhook settings every delivery will be refused "
            "(squadron app create stores the App's own)",
        )
    return Finding(
        "ok",
        check,
        f"posts to the WebhookUrl with a secret; {secret} was stored after the deploy (no delivery yet)",
    )
