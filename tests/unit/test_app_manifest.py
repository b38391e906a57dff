"""The GitHub App manifest: exactly the permissions and events Squadron uses."""

from __future__ import annotations

import html
import io
import json
import re
from pathlib import Path

import pytest

from squadron.cli import main
from squadron.domain.app_manifest import app_events, app_permissions, manifest, manifest_form
from squadron.domain.events import ROUTED_EVENTS
from squadron.domain.permissions import INSTALLATION_PERMISSIONS


def test_the_permissions_are_what_roles_and_framework_need_and_nothing_more() -> None:
    assert app_permissions() == {
        "checks": "read",
        "contents": "write",
        "issues": "write",
        "metadata": "read",
        "pull_requests": "write",
        "statuses": "write",
    }
    assert "administration" not in app_permissions()  # branch protection is a human admin's job
    for role_permissions in INSTALLATION_PERMISSIONS.values():  # every narrowed token fits inside
        for name, level in role_permissions.items():
            assert (level, app_permissions()[name]) in {
                ("read", "read"),
                ("read", "write"),
                ("write", "write"),
            }


def test_the_events_are_the_routed_ones() -> None:
    assert app_events() == sorted(ROUTED_EVENTS)
    assert "pull_request_review" in app_events() and "push" not in app_events()


def test_the_manifest_and_the_page_that_posts_it() -> None:
    body = manifest(
        name="squadron-acme", webhook_url="https://abc.execute-api/webhook", homepage="https://acme.example"
    )
    assert body["hook_attributes"] == {"url": "https://abc.execute-api/webhook", "active": True}
    assert body["public"] is False
    page = manifest_form(body, "acme")
    assert "action='https://github.com/organizations/acme/settings/apps/new'" in page
    posted = re.search(r"name='manifest' value='([^']*)'", page)
    assert posted is not None and json.loads(html.unescape(posted.group(1))) == body


@pytest.mark.parametrize(
    ("argv", "status", "said"),
    [
        (
            ["app", "manifest", "--webhook-url", "http://insecure/webhook"],
            1,
            "GitHub delivers webhooks to an https URL",
        ),
        (["app", "manifest", "--webhook-url", "https://x/webhook"], 0, '"default_events": ['),
    ],
)
def test_the_app_command(argv: list[str], status: int, said: str) -> None:
    out = io.StringIO()
    assert main(argv, out=out) == status
    assert said in out.getvalue()


def test_app_create_writes_the_page_and_says_what_comes_after(tmp_path: Path) -> None:
    out = io.StringIO()
    page = tmp_path / "app.html"
    assert main(["app", "create", "--webhook-url", "https://x/webhook", "--out", str(page)], out=out) == 0
    assert "action='https://github.com/settings/apps/new'" in page.read_text()
    assert "cdk deploy -c github_app_id=<App ID>" in out.getvalue()
    assert "GitHubAppPrivateKeySecretName" in out.getvalue()
