"""The GitHub App manifest: exactly the permissions and events Squadron uses."""

from __future__ import annotations

import html
import io
import json
import re
from pathlib import Path

import pytest

from squadron.cli import main
from squadron.domain.app_manifest import (
    CallbackRefused,
    CodeReceived,
    CreatedApp,
    FilesWritten,
    SecretsStored,
    app_events,
    app_permissions,
    callback_page,
    created_report,
    creation_url,
    local_credentials,
    manifest,
    manifest_form,
    read_callback,
    web_url_for,
)
from squadron.domain.permissions import INSTALLATION_PERMISSIONS
from squadron.domain.routed import ROUTED_EVENTS


def test_the_permissions_are_what_roles_and_framework_need_and_nothing_more() -> None:
    assert app_permissions() == {
        "checks": "read",
        "contents": "write",
        "issues": "write",
        "merge_queues": "write",
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
    assert "merge_group" in app_events()  # a branch that requires GitHub's merge queue


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
    assert (
        "squadron configure --github-app-id <App ID> --github-app-slug <slug>, then make deploy"
        in out.getvalue()
    )
    assert "GitHubAppPrivateKeySecretName" in out.getvalue()


def test_the_page_only_mode_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    assert main(["app", "create", "--webhook-url", "https://x/webhook", "--page-only"], out=out) == 0
    page = (tmp_path / "squadron-app.html").read_text()
    assert "action='https://github.com/settings/apps/new'" in page
    assert "redirect_url" not in page  # no callback: the steps are done by hand
    assert "5. install the App" in out.getvalue()


# --- the manifest flow's second half -----------------------------------------------------------

STATE = "s3cr3t-state_0123456789"


@pytest.mark.parametrize(
    ("api_url", "web_url"),
    [
        ("https://api.github.com", "https://github.com"),
        ("https://api.github.com/", "https://github.com"),
        ("https://api.octocorp.ghe.com", "https://octocorp.ghe.com"),
        ("https://ghe.acme.example/api/v3", "https://ghe.acme.example"),
        ("https://ghe.acme.example/api/v3/", "https://ghe.acme.example"),
        ("http://127.0.0.1:8123", "http://127.0.0.1:8123"),
    ],
    ids=["github.com", "trailing slash", "GHE.com", "GHE Server", "GHE Server slash", "sandbox"],
)
def test_the_web_address_follows_the_api(api_url: str, web_url: str) -> None:
    assert web_url_for(api_url) == web_url


@pytest.mark.parametrize(
    ("org", "web_url", "state", "url"),
    [
        (None, "https://github.com", None, "https://github.com/settings/apps/new"),
        ("acme", "https://github.com", None, "https://github.com/organizations/acme/settings/apps/new"),
        (None, "https://github.com", STATE, f"https://github.com/settings/apps/new?state={STATE}"),
        (
            "acme",
            "https://ghe.acme.example/",
            "a b&c",
            "https://ghe.acme.example/organizations/acme/settings/apps/new?state=a+b%26c",
        ),
    ],
    ids=["account", "organization", "with state", "GHE, state encoded"],
)
def test_where_the_manifest_is_posted(org: str | None, web_url: str, state: str | None, url: str) -> None:
    assert creation_url(org, web_url=web_url, state=state) == url


def test_the_page_of_the_callback_flow_carries_the_redirect_and_the_state() -> None:
    body = manifest(
        name="squadron",
        webhook_url="https://x/webhook",
        homepage="https://github.com",
        redirect_url="http://127.0.0.1:5555/callback",
    )
    page = manifest_form(body, None, state=STATE)
    action = re.search(r"<form action='([^']*)'", page)
    assert action is not None and html.unescape(action.group(1)) == creation_url(None, state=STATE)
    posted = re.search(r"name='manifest' value='([^']*)'", page)
    assert posted is not None
    assert json.loads(html.unescape(posted.group(1)))["redirect_url"] == "http://127.0.0.1:5555/callback"


@pytest.mark.parametrize(
    ("query", "taken", "outcome"),
    [
        (f"code=abc123&state={STATE}", False, CodeReceived("abc123")),
        (f"state={STATE}&code=abc123", False, CodeReceived("abc123")),
        ("code=abc123&state=another-run", False, 403),
        ("code=abc123", False, 403),
        (f"code=abc123&state={STATE}&state=x", False, 403),
        (f"code=abc123&state={STATE}x", False, 403),
        (f"state={STATE}", False, 400),
        (f"code=&state={STATE}", False, 400),
        (f"code=a&code=b&state={STATE}", False, 400),
        (f"code={'a' * 257}&state={STATE}", False, 400),
        (f"code=abc123&state={STATE}", True, 409),
        ("", False, 403),
    ],
    ids=[
        "right",
        "any order",
        "state of another run",
        "no state",
        "two states",
        "longer state",
        "no code",
        "empty code",
        "two codes",
        "code too long",
        "second callback",
        "nothing",
    ],
)
def test_what_a_callback_means(query: str, taken: bool, outcome: CodeReceived | int) -> None:
    got = read_callback(query, expected_state=STATE, code_taken=taken)
    if isinstance(outcome, CodeReceived):
        assert got == outcome
    else:
        assert isinstance(got, CallbackRefused) and got.status == outcome
        assert "abc123" not in got.reason


def test_an_empty_expected_state_matches_nothing() -> None:
    assert isinstance(read_callback("code=c&state=", expected_state="", code_taken=False), CallbackRefused)


@pytest.mark.parametrize(
    ("outcome", "status", "said"),
    [
        (CodeReceived("c0de"), 200, "You can close this tab"),
        (CallbackRefused("the state does not match <x>", 403), 403, "the state does not match &lt;x&gt;."),
    ],
    ids=["received", "refused, escaped"],
)
def test_what_the_browser_is_told(outcome: CodeReceived | CallbackRefused, status: int, said: str) -> None:
    got_status, page = callback_page(outcome)
    assert got_status == status and said in page and "c0de" not in page


CREATED = CreatedApp.model_validate(
    {
        "id": 7,
        "slug": "squadron-acme",
        "name": "Squadron Acme",
        "html_url": "https://github.com/apps/squadron-acme",
        "client_id": "Iv1.abc",
        "client_secret": "CLIENT-SECRET",
        "webhook_secret": "WEBHOOK-SECRET",
        "pem": "-----BEGIN RSA PRIVATE KEY-----\nPEM-BODY\n-----END RSA PRIVATE KEY-----\n",
        "owner": {"login": "acme"},
    }
)
SECRETS = ("CLIENT-SECRET", "WEBHOOK-SECRET", "PEM-BODY")
NO_WEBHOOK_SECRET = CREATED.model_copy(update={"webhook_secret": None})


def test_the_created_app_keeps_its_secrets_out_of_its_text() -> None:
    for text in (repr(CREATED), str(CREATED), CREATED.model_dump_json()):
        assert not [s for s in SECRETS if s in text]
    assert CREATED.install_url == "https://github.com/apps/squadron-acme/installations/new"


def test_with_the_app_kept_for_the_deploy_the_next_step_is_the_deploy() -> None:
    where = SecretsStored("Squadron-prod", "prod/key", "prod/webhook")
    report = created_report(CREATED, where, recorded="cdk.context.json")
    assert "kept its id and slug in cdk.context.json for the next deploy" in report
    assert "  1. deploy the stack as this App: make deploy\n" in report
    assert "squadron configure" not in report


@pytest.mark.parametrize(
    ("app", "where", "said", "not_said"),
    [
        (
            CREATED,
            SecretsStored("Squadron-dev", "dev/github-app-private-key", "dev/webhook-secret"),
            [
                "created the GitHub App Squadron Acme (squadron-acme, id 7): https://github.com/apps/squadron-acme",
                "stored its private key in dev/github-app-private-key and its webhook secret in "
                "dev/webhook-secret (stack Squadron-dev)",
                "  1. deploy the stack as this App: squadron configure --github-app-id 7 --github-app-slug "
                "squadron-acme, then make deploy",
                "  2. install the App on each repository it should work in (Only select repositories): "
                "https://github.com/apps/squadron-acme/installations/new",
            ],
            ["aws secretsmanager"],
        ),
        (
            NO_WEBHOOK_SECRET,
            SecretsStored("Squadron-dev", "dev/key", "dev/webhook"),
            [
                "stored its private key in dev/key (stack",
                "set one on the App's settings page and store it in dev/webhook",
            ],
            [],
        ),
        (
            CREATED,
            FilesWritten("out/private-key.pem", "out/webhook-secret"),
            [
                "wrote its private key to out/private-key.pem, its webhook secret to out/webhook-secret",
                "--secret-id <GitHubAppPrivateKeySecretName> --secret-string file://out/private-key.pem",
                "--secret-id <WebhookSecretName> --secret-string file://out/webhook-secret",
                "  2. deploy the stack as this App: squadron configure --github-app-id 7",
                "  3. install the App",
            ],
            ["could not store", "squadron local"],
        ),
        (
            CREATED,
            FilesWritten(
                "out/private-key.pem",
                "out/webhook-secret",
                private_key_secret="dev/key",
                webhook_secret_name="dev/webhook",
                stack_failure="storing the App's private key in dev/key failed: AccessDenied",
            ),
            [
                "could not store them in the stack's secrets: storing the App's private key in dev/key failed",
                "--secret-id dev/key --secret-string file://out/private-key.pem",
                "--secret-id dev/webhook --secret-string file://out/webhook-secret",
            ],
            [],
        ),
        (
            CREATED,
            FilesWritten("out/private-key.pem", "out/webhook-secret", credentials="out/github-app.yaml"),
            [
                "the credentials of `squadron local --github-app` to out/github-app.yaml",
                "  1. run the local stack as this App: squadron local --github-app out/github-app.yaml",
                "  2. install the App",
            ],
            ["make deploy", "aws secretsmanager"],
        ),
    ],
    ids=["stack", "stack, no webhook secret", "files", "stack refused: files", "local"],
)
def test_what_is_said_once_the_app_exists(
    app: CreatedApp, where: SecretsStored | FilesWritten, said: list[str], not_said: list[str]
) -> None:
    report = created_report(app, where)
    for line in said:
        assert line in report
    for text in (*not_said, *SECRETS):
        assert text not in report


@pytest.mark.parametrize(
    ("api_url", "extra"),
    [
        ("https://api.github.com", {}),
        (
            "https://ghe.acme.example/api/v3",
            {
                "api_url": "https://ghe.acme.example/api/v3",
                "git_remote_template": "https://ghe.acme.example/{repo}.git",
            },
        ),
    ],
    ids=["github.com", "GHE Server"],
)
def test_the_credentials_of_squadron_local(api_url: str, extra: dict[str, str]) -> None:
    values = local_credentials(app_id=7, private_key_file="/k.pem", webhook_secret="w", api_url=api_url)
    assert values == {"app_id": 7, "private_key_file": "/k.pem", "webhook_secret": "w", **extra}
