"""The GitHub App manifest: the permissions and events Squadron needs, and nothing more.

Derived, not written by hand: the events are those the router routes; the permissions are
the union of what each role's narrowed token gets and what the framework itself does (merge,
delete branches, post ``squadron/*`` statuses, read CI's check runs). GitHub's manifest flow
takes it as a form POST from the browser of the person creating the App.

The flow's second half, as GitHub documents it: once the person confirms, GitHub sends the
browser to the manifest's ``redirect_url`` with a temporary ``code`` (and the ``state`` the
form's action carried); ``POST /app-manifests/{code}/conversions`` exchanges the code, within
an hour, for the App's id, private key and webhook secret. What to make of a callback and what
to say afterwards is decided here; the loopback server, the exchange and the storing are the
shell's.
"""

from __future__ import annotations

import hmac
import html
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

from pydantic import BaseModel, ConfigDict, SecretStr

from squadron.domain.permissions import INSTALLATION_PERMISSIONS
from squadron.domain.routed import ROUTED_EVENTS

GITHUB_WEB_URL = "https://github.com"
GITHUB_API_URL = "https://api.github.com"
CALLBACK_PATH = "/callback"
#: Longer than any code GitHub sends (40 hex digits); a longer one is not GitHub's.
MAX_CODE_LENGTH = 256

#: What the framework (router, merge gate, reconciler) does beyond the roles' tokens.
FRAMEWORK_PERMISSIONS = {
    "contents": "write",  # merge, delete merged branches, read .squadron
    "pull_requests": "write",
    "issues": "write",  # labels, needs-human issues, escalation comments
    "statuses": "write",  # squadron/merge
    "checks": "read",  # CI's check runs, for the merge gate (and the check_run events)
    # GitHub's merge queue: queue a judged pull request, take out the App's own entries (GraphQL),
    # and the merge_group events.
    "merge_queues": "write",
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


def web_url_for(api_url: str) -> str:
    """GitHub's web address for its REST API's: ``https://api.HOST`` (github.com, GHE.com)
    is served from ``https://HOST``, GitHub Enterprise Server's ``https://HOST/api/v3`` from
    ``https://HOST``; anything else (the local sandbox) serves both from one address."""
    api = api_url.rstrip("/")
    parts = urlsplit(api)
    if parts.path.rstrip("/") == "/api/v3":
        return api.removesuffix(parts.path)
    if parts.netloc.startswith("api.") and not parts.path:
        return f"{parts.scheme}://{parts.netloc.removeprefix('api.')}"
    return api


def creation_url(org: str | None, *, web_url: str = GITHUB_WEB_URL, state: str | None = None) -> str:
    """Where the manifest is posted: the account's or the organization's "new App" page; GitHub
    hands ``state`` back on the redirect."""
    base = f"{web_url.rstrip('/')}/organizations/{quote(org, safe='')}" if org else web_url.rstrip("/")
    url = f"{base}/settings/apps/new"
    return f"{url}?{urlencode({'state': state})}" if state else url


#: What each permission lets the App do, as the page explains it (GitHub's names).
PERMISSION_USES = {
    "checks": "read CI's check runs for the merge gate",
    "contents": "push agents' branches, merge, read .squadron/",
    "issues": "label, assign, comment, open blocker and dashboard issues",
    "merge_queues": "queue a judged pull request in GitHub's merge queue",
    "metadata": "read the repository (always granted)",
    "pull_requests": "open, review and comment on pull requests",
    "statuses": "post the squadron/* statuses the merge gate reads",
}


def manifest_form(
    app_manifest: dict[str, Any],
    org: str | None,
    *,
    state: str | None = None,
    web_url: str = GITHUB_WEB_URL,
) -> str:
    """An HTML page that shows what the App will be (its name, webhook, permissions and events,
    and the GitHub it is created on) and posts the manifest there when its button is pressed."""
    value = html.escape(json.dumps(app_manifest), quote=True)
    action = html.escape(creation_url(org, web_url=web_url, state=state), quote=True)
    hook = app_manifest.get("hook_attributes", {})
    owner = f"the organization {org}" if org else "your account"
    rows = [
        ("Name", str(app_manifest.get("name", ""))),
        ("Created on", f"{web_url.rstrip('/')} ({owner})"),
        ("Webhook", f"{hook.get('url', '')} ({'active' if hook.get('active') else 'inactive'})"),
        ("Homepage", str(app_manifest.get("url", ""))),
        (
            "Who can install it",
            "anyone" if app_manifest.get("public") else f"only {owner} (a private App)",
        ),
    ]
    if app_manifest.get("redirect_url"):
        rows.append(("Then back to", str(app_manifest["redirect_url"])))
    permissions = app_manifest.get("default_permissions", {})
    events = app_manifest.get("default_events", [])
    after = (
        "<p>Then GitHub sends this browser back to Squadron on this machine, which fetches the App's "
        "private key and webhook secret.</p>\n"
        if app_manifest.get("redirect_url")
        else ""
    )
    return (
        "<!doctype html>\n<html><head><meta charset='utf-8'><title>Create the Squadron GitHub App</title>"
        "</head><body>\n<h1>Create the Squadron GitHub App</h1>\n"
        "<p>Pressing the button sends this App's manifest to GitHub, which shows it again before "
        "creating the App.</p>\n"
        f"<table id='app'>\n{_rows(rows)}</table>\n"
        f"<h2>Permissions ({len(permissions)})</h2>\n<table id='permissions'>\n"
        + _rows(
            (name, f"{level}: {PERMISSION_USES.get(name, '')}".rstrip(": "))
            for name, level in sorted(permissions.items())
        )
        + f"</table>\n<h2>Events ({len(events)})</h2>\n<ul id='events'>\n"
        + "".join(f"<li>{html.escape(str(event))}</li>\n" for event in events)
        + "</ul>\n"
        f"<form action='{action}' method='post'>\n"
        f"<input type='hidden' name='manifest' value='{value}'>\n"
        f"{after}"
        "<button type='submit'>Create the GitHub App</button>\n</form>\n</body></html>\n"
    )


def _rows(pairs: Iterable[tuple[str, str]]) -> str:
    return "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>\n" for k, v in pairs)


# --- the callback ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CodeReceived:
    """GitHub's redirect, with this run's state: the code to exchange (once)."""

    code: str = field(repr=False)


@dataclass(frozen=True)
class CallbackRefused:
    """A request on the callback that is not (or no longer) to be acted on; the code is not used."""

    reason: str
    status: int = 400


CallbackOutcome = CodeReceived | CallbackRefused


def read_callback(query: str, *, expected_state: str, code_taken: bool) -> CallbackOutcome:
    """What to make of a request to the callback with ``query`` (its query string).

    Only the first redirect that carries this run's state and one code is acted on; the state
    is compared in constant time, before the code is looked at.
    """
    if code_taken:
        return CallbackRefused(
            "Squadron already has the code of this run's App; this callback was ignored", 409
        )
    params = parse_qs(query, keep_blank_values=True)
    states = params.get("state", [])
    if (
        not expected_state
        or len(states) != 1
        or not hmac.compare_digest(states[0].encode(), expected_state.encode())
    ):
        return CallbackRefused(
            "the state does not match the page this run of `squadron app create` served (a page of "
            "an earlier run, or not Squadron's): its code was not used",
            403,
        )
    codes = params.get("code", [])
    if len(codes) != 1 or not codes[0]:
        return CallbackRefused("no code: GitHub sends ?code=... once it has created the App")
    if len(codes[0]) > MAX_CODE_LENGTH:
        return CallbackRefused("the code is longer than any GitHub sends: it was not used")
    return CodeReceived(codes[0])


def callback_page(outcome: CallbackOutcome) -> tuple[int, str]:
    """The status and the HTML page the browser is answered with."""
    if isinstance(outcome, CodeReceived):
        status, title, text = (
            200,
            "GitHub created the App",
            "Squadron is fetching its private key and webhook secret; the terminal says what comes "
            "next. You can close this tab.",
        )
    else:
        status, title, text = outcome.status, "Squadron did not use this callback", outcome.reason + "."
    return status, (
        "<!doctype html>\n<html><head><meta charset='utf-8'><title>Squadron</title></head><body>\n"
        f"<h1>{html.escape(title)}</h1>\n<p>{html.escape(text)}</p>\n</body></html>\n"
    )


# --- the exchange's result --------------------------------------------------------------------


class CreatedApp(BaseModel):
    """GitHub's answer to the exchange (201 of ``apps/create-from-manifest``): the App and its
    secrets, which print as ``**********``."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: int
    slug: str
    name: str = ""
    html_url: str
    client_id: str
    client_secret: SecretStr
    webhook_secret: SecretStr | None
    pem: SecretStr

    @property
    def install_url(self) -> str:
        return f"{self.html_url.rstrip('/')}/installations/new"


@dataclass(frozen=True)
class SecretsStored:
    """The private key and webhook secret went into the stack's Secrets Manager secrets."""

    stack: str
    private_key_secret: str
    webhook_secret: str


@dataclass(frozen=True)
class FilesWritten:
    """The private key and webhook secret went into files only their owner may read."""

    private_key: str
    webhook_secret: str | None
    #: The YAML ``squadron local --github-app`` takes (with --local).
    credentials: str | None = None
    #: The secrets to store them in (their names when known: the stack refused them).
    private_key_secret: str = "<GitHubAppPrivateKeySecretName>"  # noqa: S105 (a name, not a secret)
    webhook_secret_name: str = "<WebhookSecretName>"  # noqa: S105
    #: Why they are not in the stack's secrets, when they should have been.
    stack_failure: str | None = None


def local_credentials(
    *, app_id: int, private_key_file: str, webhook_secret: str, api_url: str
) -> dict[str, Any]:
    """The credentials file of ``squadron local --github-app`` for the new App."""
    values: dict[str, Any] = {
        "app_id": app_id,
        "private_key_file": private_key_file,
        "webhook_secret": webhook_secret,
    }
    if api_url.rstrip("/") != GITHUB_API_URL:
        values["api_url"] = api_url
        values["git_remote_template"] = web_url_for(api_url) + "/{repo}.git"
    return values


def waiting_banner(*, page_url: str, posts_to: str, port: int, timeout_minutes: float) -> str:
    return (
        f"open {page_url} in a browser on this machine and press the button: GitHub ({posts_to}) shows\n"
        "the App's permissions and events before it creates it, then sends the browser back here "
        f"(waiting {timeout_minutes:g} min; Ctrl-C stops).\n"
        f"Over ssh, forward the port first (ssh -L {port}:127.0.0.1:{port} ...), or run again later with "
        "--code and the code GitHub's redirect carries.\n"
    )


def created_report(
    app: CreatedApp, where: SecretsStored | FilesWritten, *, recorded: str | None = None
) -> str:
    """What the terminal says once the App exists: never its private key or secrets. ``recorded``:
    the context file that now keeps the App's id and slug for the next deploy, if any."""
    lines = [f"created the GitHub App {app.name or app.slug} ({app.slug}, id {app.id}): {app.html_url}"]
    steps: list[str] = []
    if isinstance(where, SecretsStored):
        if app.webhook_secret is not None:
            lines.append(
                f"stored its private key in {where.private_key_secret} and its webhook secret in "
                f"{where.webhook_secret} (stack {where.stack})"
            )
        else:
            lines.append(f"stored its private key in {where.private_key_secret} (stack {where.stack})")
            steps.append(
                "GitHub gave no webhook secret: set one on the App's settings page and store it in "
                f"{where.webhook_secret}"
            )
    else:
        if where.stack_failure:
            lines.append(f"could not store them in the stack's secrets: {where.stack_failure}")
        written = f"wrote its private key to {where.private_key}"
        if where.webhook_secret:
            written += f", its webhook secret to {where.webhook_secret}"
        if where.credentials:
            written += f", the credentials of `squadron local --github-app` to {where.credentials}"
        lines.append(written + " (readable only by you; keep them out of git)")
        if where.webhook_secret is None:
            steps.append("GitHub gave no webhook secret: set one on the App's settings page")
        if where.credentials:
            steps.append(
                f"run the local stack as this App: squadron local --github-app {where.credentials} (GitHub "
                "must reach the App's webhook URL: a tunnel to the local endpoint)"
            )
        else:
            store = [
                "store them in the stack's secrets (names in its outputs), then delete the files:",
                f"     aws secretsmanager put-secret-value --secret-id {where.private_key_secret} "
                f"--secret-string file://{where.private_key}",
            ]
            if where.webhook_secret:
                store.append(
                    f"     aws secretsmanager put-secret-value --secret-id {where.webhook_secret_name} "
                    f"--secret-string file://{where.webhook_secret}"
                )
            steps.append("\n".join(store))
    if recorded is not None:
        lines.append(f"kept its id and slug in {recorded} for the next deploy")
        steps.append("deploy the stack as this App: make deploy")
    elif not (isinstance(where, FilesWritten) and where.credentials):
        steps.append(
            "deploy the stack as this App: squadron configure --github-app-id "
            f"{app.id} --github-app-slug {app.slug}, then make deploy"
        )
    steps.append(
        f"install the App on each repository it should work in (Only select repositories): {app.install_url}"
    )
    lines.append("next:")
    lines += [f"  {number}. {step}" for number, step in enumerate(steps, 1)]
    return "\n".join(lines) + "\n"
