"""The page of `squadron app create` in a real browser (Debian's Chromium, headless): it renders,
carries the App's manifest, and pressing its button posts that manifest to the configured
GitHub, whose redirect brings the code back to the command, which finishes the flow.

GitHub's web side is a loopback stand-in: it takes the form post of its "new App" page as
github.com does (``manifest`` form field, ``state`` in the query) and, as once the person has
confirmed there, redirects the browser to the manifest's ``redirect_url`` with a code; its REST
side answers the code exchange with GitHub's documented example.
"""

from __future__ import annotations

import copy
import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from squadron import app_cli
from squadron.cli import main
from squadron.domain.app_manifest import app_events, app_permissions, manifest
from tests.support.chromium import Page, chromium, require_chromium, wait_for
from tests.support.github_openapi import spec

CODE = "a180b1a3d263c81bc6441d7b990bae27d4c10679"
WEBHOOK_URL = "https://abc123.execute-api.eu-west-1.amazonaws.com/webhook"


class GitHubWeb(BaseHTTPRequestHandler):
    """github.com's "new App" page and the manifest-conversion endpoint, on loopback."""

    posts: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        parts = urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        if parts.path.startswith("/app-manifests/") and parts.path.endswith("/conversions"):
            found = parts.path.split("/")[2] == CODE
            app = copy.deepcopy(spec()["components"]["examples"]["integration-from-manifest"]["value"])
            self._answer(
                201 if found else 404,
                "application/json",
                json.dumps(app if found else {"message": "Not Found"}),
            )
            return
        form = parse_qs(body.decode())
        posted = json.loads(form["manifest"][0])
        self.posts.append(
            {
                "path": parts.path,
                "query": parse_qs(parts.query),
                "type": self.headers.get("content-type"),
                "manifest": posted,
            }
        )
        if posted.get("redirect_url"):
            state = parse_qs(parts.query)["state"][0]
            self.send_response(302)
            self.send_header(
                "location", f"{posted['redirect_url']}?{urlencode({'code': CODE, 'state': state})}"
            )
            self.send_header("content-length", "0")
            self.end_headers()
            return
        self._answer(200, "text/html", "<html><body><h1>Create GitHub App</h1></body></html>")

    def _answer(self, status: int, kind: str, text: str) -> None:
        payload = text.encode()
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def browser() -> Iterator[Page]:
    require_chromium()
    with chromium() as page:
        yield page


@pytest.fixture
def github() -> Iterator[str]:
    GitHubWeb.posts = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), GitHubWeb)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _form(browser: Page) -> dict[str, Any]:
    return dict(
        browser.evaluate(
            "(() => { const f = document.querySelector('form'); return {title: document.title, "
            "action: f.action, method: f.method, manifest: f.elements.manifest.value, "
            "button: document.querySelector('button[type=submit]').textContent}; })()"
        )
    )


@pytest.mark.parametrize("org", [None, "acme"], ids=["account", "organization"])
def test_the_page_carries_the_manifest_and_posts_it_to_github_which_sends_the_code_back(
    browser: Page, github: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, org: str | None
) -> None:
    opened: list[str] = []

    def person_opens(url: str) -> bool:
        opened.append(url)
        return True

    monkeypatch.setattr(app_cli, "_open_browser", person_opens)
    out = io.StringIO()
    result: list[int] = []
    argv = [
        "app", "create", "--webhook-url", WEBHOOK_URL, "--name", "squadron-acme", "--api-url", github,
        "--github-url", github, "--out-dir", str(tmp_path / "app"), "--timeout", "1",
        *(["--org", org] if org else []),
    ]  # fmt: skip
    command = threading.Thread(target=lambda: result.append(main(argv, out=out)), daemon=True)
    command.start()
    page_url = wait_for("page from squadron app create", lambda: opened[0] if opened else None)

    browser.open(page_url)
    form = _form(browser)
    carried = json.loads(form["manifest"])
    callback = carried["redirect_url"]
    assert form["title"] == "Create the Squadron GitHub App"
    assert form["method"] == "post" and form["button"] == "Create the GitHub App"
    assert carried == manifest(
        name="squadron-acme", webhook_url=WEBHOOK_URL, homepage="https://github.com", redirect_url=callback
    )
    where = f"{github}/organizations/{org}/settings/apps/new" if org else f"{github}/settings/apps/new"
    assert form["action"].startswith(where + "?state=")

    browser.evaluate("document.querySelector('button[type=submit]').click()")
    wait_for("the command to finish", lambda: not command.is_alive())
    # The browser followed GitHub's redirect to the command's callback, which took the code.
    wait_for("callback page", lambda: browser.location().startswith(callback) and browser.ready())
    assert browser.evaluate("document.querySelector('h1').textContent") == "GitHub created the App"
    (post,) = GitHubWeb.posts
    assert post["type"] == "application/x-www-form-urlencoded"
    assert post["path"] == urlsplit(where).path
    assert post["manifest"] == carried
    assert post["query"]["state"] == parse_qs(urlsplit(form["action"]).query)["state"]
    assert result == [0], out.getvalue()
    assert (tmp_path / "app" / "private-key.pem").read_text().startswith("-----BEGIN RSA PRIVATE KEY-----")


def test_the_written_page_posts_the_manifest_without_a_local_callback(
    browser: Page, github: str, tmp_path: Path
) -> None:
    page = tmp_path / "squadron-app.html"
    out = io.StringIO()
    argv = [
        "app",
        "create",
        "--webhook-url",
        WEBHOOK_URL,
        "--page-only",
        "--out",
        str(page),
        "--github-url",
        github,
    ]
    assert main(argv, out=out) == 0, out.getvalue()
    browser.open(page.as_uri())
    form = _form(browser)
    assert json.loads(form["manifest"]) == manifest(
        name="squadron", webhook_url=WEBHOOK_URL, homepage="https://github.com"
    )
    browser.evaluate("document.querySelector('button[type=submit]').click()")
    wait_for("GitHub's page", lambda: browser.location() == f"{github}/settings/apps/new" and browser.ready())
    (post,) = GitHubWeb.posts
    assert post["manifest"] == json.loads(form["manifest"])
    assert post["query"] == {}


def _shown(browser: Page, table: str) -> dict[str, str]:
    """A table of the page as a person reads it: each row's heading and its text."""
    rows = browser.evaluate(
        f"[...document.querySelectorAll('table#{table} tr')].map(r => [r.cells[0].innerText, r.cells[1].innerText])"
    )
    return {str(name): str(text) for name, text in rows}


def test_the_page_shows_the_apps_name_webhook_permissions_and_events_and_posts_to_the_configured_github(
    browser: Page, github: str, tmp_path: Path
) -> None:
    """Created on a GitHub Enterprise Server: only its API URL is given (HOST/api/v3); the page
    names that server and posts there, never to github.com."""
    page = tmp_path / "squadron-app.html"
    out = io.StringIO()
    argv = [
        "app", "create", "--webhook-url", WEBHOOK_URL, "--name", "squadron-acme", "--org", "acme",
        "--page-only", "--out", str(page), "--api-url", f"{github}/api/v3",
    ]  # fmt: skip
    assert main(argv, out=out) == 0, out.getvalue()
    browser.open(page.as_uri())
    browser.screenshot(tmp_path / "screenshots" / "app-page.png")
    assert _shown(browser, "app") == {
        "Name": "squadron-acme",
        "Created on": f"{github} (the organization acme)",
        "Webhook": f"{WEBHOOK_URL} (active)",
        "Homepage": "https://github.com",
        "Who can install it": "only the organization acme (a private App)",
    }
    permissions = _shown(browser, "permissions")
    assert {name: text.split(":")[0] for name, text in permissions.items()} == app_permissions()
    assert all(": " in text for text in permissions.values()), permissions  # each says what it is for
    assert (
        browser.evaluate("[...document.querySelectorAll('ul#events li')].map(li => li.innerText)")
        == app_events()
    )
    assert "github.com/" not in str(browser.evaluate("document.querySelector('form').action"))

    browser.evaluate("document.querySelector('button[type=submit]').click()")
    wait_for("the server's page", lambda: browser.location().startswith(github) and browser.ready())
    (post,) = GitHubWeb.posts
    assert post["path"] == "/organizations/acme/settings/apps/new"
    assert post["manifest"]["default_permissions"] == app_permissions()
    assert (tmp_path / "screenshots" / "app-page.png").stat().st_size > 0
