"""The GitHub App manifest: the permissions and events Squadron needs, and nothing more.

Derived, not written by hand: the events are those the router routes; the permissions are
the union of what each role's narrowed token gets and what the framework itself does (merge,
delete branches, post ``squadron/*`` statuses, read CI's check runs). GitHub's manifest flow
takes it as a form POST from the browser of the person creating the App.
"""

from __future__ import annotations

import html
import json
from typing import Any

from squadron.domain.events import ROUTED_EVENTS
from squadron.domain.permissions import INSTALLATION_PERMISSIONS

#: What the framework (router, merge gate, reconciler) does beyond the roles' tokens.
FRAMEWORK_PERMISSIONS = {
    "contents": "write",  # merge, delete merged branches, read .squadron
    "pull_requests": "write",
    "issues": "write",  # labels, needs-human issues, escalation comments
    "statuses": "write",  # squadron/merge
    "checks": "read",  # CI's check runs, for the merge gate (and the check_run events)
    "metadata": "read",
}
_LEVELS = {"read": 1, "write": 2}


def app_permissions() -> dict[str, str]:
    """Each permission at the highest level anything in Squadron needs it."""
    merged: dict[str, str] = {}
    for permissions in (*INSTALLATION_PERMISSIONS.values(), FRAMEWORK_PERMISSIONS):
        for name, level in permissions.items():
            if _LEVELS[level] > _LEVELS.get(merged.get(name, ""), 0):
                merged[name] = level
    return dict(sorted(merged.items()))


def app_events() -> list[str]:
    return sorted(ROUTED_EVENTS)


def manifest(
    *, name: str, webhook_url: str, homepage: str, redirect_url: str | None = None
) -> dict[str, Any]:
    """The manifest GitHub's "create an App from a manifest" flow takes."""
    body: dict[str, Any] = {
        "name": name,
        "url": homepage,
        "hook_attributes": {"url": webhook_url, "active": True},
        "public": False,
        "default_permissions": app_permissions(),
        "default_events": app_events(),
    }
    if redirect_url:
        body["redirect_url"] = redirect_url
    return body


def creation_url(org: str | None) -> str:
    if org:
        return f"https://github.com/organizations/{org}/settings/apps/new"
    return "https://github.com/settings/apps/new"


def manifest_form(app_manifest: dict[str, Any], org: str | None) -> str:
    """An HTML page that posts the manifest to GitHub when its button is pressed."""
    value = html.escape(json.dumps(app_manifest), quote=True)
    return (
        "<!doctype html>\n<html><head><meta charset='utf-8'><title>Create the Squadron GitHub App</title>"
        "</head><body>\n"
        f"<form action='{html.escape(creation_url(org), quote=True)}' method='post'>\n"
        f"<input type='hidden' name='manifest' value='{value}'>\n"
        "<p>GitHub will show the App's name, webhook, permissions and events before creating it.</p>\n"
        "<button type='submit'>Create the GitHub App</button>\n</form>\n</body></html>\n"
    )
