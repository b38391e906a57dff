"""The manifest flow's second half: the loopback callback, the exchange of GitHub's code (each
request checked against GitHub's OpenAPI description, answered with its documented example), and
where the App's private key and webhook secret go (the stack's secrets under moto, or files)."""

from __future__ import annotations

import copy
import dataclasses
import io
import json
import re
import socket
import stat
import threading
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

import boto3
import httpx
import pytest
from moto import mock_aws

from squadron import app_cli
from squadron.adapters.github.errors import (
    GitHubError,
    GitHubUnavailableError,
    NotFoundError,
    ValidationFailedError,
)
from squadron.adapters.github.manifests import ManifestConversions
from squadron.adapters.manifest_callback import CallbackTimeoutError, ManifestCallbackServer
from squadron.adapters.operations import Operations, OperatorError, stack_target
from squadron.cli import main
from squadron.domain.app_manifest import CreatedApp
from squadron.local.credentials import load_credentials
from tests.support.github_openapi import spec, validate

CODE = "a180b1a3d263c81bc6441d7b990bae27d4c10679"  # the shape of GitHub's documented example
STATE = "state-of-this-run"
DOCS = "https://docs.github.com/rest/apps/apps#create-a-github-app-from-a-manifest"
KEY_SECRET = "squadron-dev/github-app-private-key"
HOOK_SECRET = "squadron-dev/webhook-secret"


@pytest.fixture(autouse=True)
def _in_a_scratch_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # cdk.context.json, a relative --out-dir
    # The default --out-dir is the user's: never the real one's.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))


def get(url: str) -> httpx.Response:
    return httpx.get(url, trust_env=False)  # loopback, never through a proxy


def documented_app() -> dict[str, Any]:
    """GitHub's documented 201 answer of apps/create-from-manifest (its OpenAPI example)."""
    example = spec()["components"]["examples"]["integration-from-manifest"]["value"]
    return copy.deepcopy(example)


def secrets_in(text: str) -> list[str]:
    """Whatever of the App's secrets ``text`` shows (the key's body lines, one by one)."""
    app = documented_app()
    shown = [app[name] for name in ("webhook_secret", "client_secret") if app[name] in text]
    return shown + [line for line in app["pem"].splitlines()[1:-1] if line in text]


class ManifestGitHub:
    """GitHub's side of the flow: creating an App issues a code; each code works once."""

    def __init__(self, *codes: str, answer: httpx.Response | None = None) -> None:
        self.codes = set(codes)
        self.answer = answer
        self.requests: list[httpx.Request] = []
        self.manifests: list[dict[str, Any]] = []

    def create_app(self, manifest: dict[str, Any]) -> str:
        """The person confirmed on GitHub's page: the App exists, the redirect carries this code."""
        self.manifests.append(manifest)
        self.codes.add(CODE)
        return CODE

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        # GitHub Enterprise Server serves the same operations under /api/v3.
        path = request.url.raw_path.decode().removeprefix("/api/v3")
        as_on_github = httpx.Request(request.method, "https://api.github.com" + path, content=request.content)
        assert validate(as_on_github).operation_id == "apps/create-from-manifest"
        assert "authorization" not in request.headers  # the code is the only credential
        if self.answer is not None:
            return self.answer
        code = unquote(request.url.raw_path.decode().split("/")[-2])
        if code not in self.codes:
            return httpx.Response(404, json={"message": "Not Found", "documentation_url": DOCS})
        self.codes.discard(code)
        return httpx.Response(201, json=documented_app())

    def conversions(self, base_url: str = "https://api.github.com", **kwargs: Any) -> ManifestConversions:
        return ManifestConversions(
            base_url=base_url, transport=httpx.MockTransport(self.handle), sleep=lambda s: None, **kwargs
        )

    @property
    def exchanged(self) -> list[str]:
        return [unquote(r.url.raw_path.decode().split("/")[-2]) for r in self.requests]


# --- the exchange ------------------------------------------------------------------------------


def test_what_the_app_requires_of_the_answer_github_documents() -> None:
    definition = spec()["paths"]["/app-manifests/{code}/conversions"]["post"]
    schema = definition["responses"]["201"]["content"]["application/json"]["schema"]
    documented: set[str] = set()
    required: set[str] = set()
    for part in schema["allOf"]:
        resolved = (
            spec()["components"]["schemas"][part["$ref"].rsplit("/", 1)[-1]] if "$ref" in part else part
        )
        documented |= set(resolved["properties"])
        required |= set(resolved.get("required", []))
    ours = {name for name, field in CreatedApp.model_fields.items() if field.is_required()}
    assert ours <= documented
    assert {"pem", "webhook_secret", "client_secret"} <= required


def test_the_code_is_exchanged_as_github_documents() -> None:
    github = ManifestGitHub(CODE)
    app = github.conversions().convert(CODE)
    assert (app.id, app.slug, app.html_url) == (1, "octoapp", "https://github.com/apps/octoapp")
    assert app.pem.get_secret_value() == documented_app()["pem"]
    assert app.install_url == "https://github.com/apps/octoapp/installations/new"
    (request,) = github.requests
    assert (request.method, str(request.url)) == (
        "POST",
        f"https://api.github.com/app-manifests/{CODE}/conversions",
    )
    assert request.headers["x-github-api-version"] == "2022-11-28" and not request.content
    assert not secrets_in(repr(app))


def test_a_code_works_once_and_the_refusal_does_not_repeat_it() -> None:
    github = ManifestGitHub(CODE)
    conversions = github.conversions()
    conversions.convert(CODE)
    with pytest.raises(NotFoundError) as refused:
        conversions.convert(CODE)
    assert str(refused.value) == "POST /app-manifests/{code}/conversions: GitHub answered 404: Not Found"
    assert CODE not in str(refused.value)


@pytest.mark.parametrize(
    ("api_url", "code", "url"),
    [
        ("https://api.github.com", CODE, f"https://api.github.com/app-manifests/{CODE}/conversions"),
        (
            "https://ghe.acme.example/api/v3",
            CODE,
            f"https://ghe.acme.example/api/v3/app-manifests/{CODE}/conversions",
        ),
        ("http://127.0.0.1:8123/", "c0de", "http://127.0.0.1:8123/app-manifests/c0de/conversions"),
        ("https://api.github.com", "a/b?c", "https://api.github.com/app-manifests/a%2Fb%3Fc/conversions"),
    ],
    ids=["github.com", "GHE Server", "sandbox", "code escaped"],
)
def test_the_api_is_configurable(api_url: str, code: str, url: str) -> None:
    github = ManifestGitHub(code)
    github.conversions(api_url).convert(code)
    assert str(github.requests[0].url) == url


ERROR_ANSWERS = [
    (
        httpx.Response(404, json={"message": "Not Found", "documentation_url": DOCS}),
        NotFoundError,
        "GitHub answered 404: Not Found",
    ),
    (
        httpx.Response(
            422,
            json={"message": "Validation Failed", "documentation_url": DOCS, "errors": ["code has expired"]},
        ),
        ValidationFailedError,
        "GitHub answered 422: Validation Failed (code has expired)",
    ),
    (httpx.Response(502, text="<html>bad gateway</html>"), GitHubUnavailableError, "GitHub answered 502"),
    (
        httpx.Response(201, json={k: v for k, v in documented_app().items() if k != "pem"}),
        GitHubError,
        "unexpected answer: not an App with its secrets (pem)",
    ),
    (
        httpx.Response(201, text="<html>"),
        GitHubError,
        "unexpected answer: not an App with its secrets (its body)",
    ),
]


@pytest.mark.parametrize(
    ("answer", "kind", "said"),
    ERROR_ANSWERS,
    ids=["404 used or unknown", "422 refused", "5xx, not retried", "no private key", "not JSON"],
)
def test_githubs_refusals_are_named_errors_with_its_message(
    answer: httpx.Response, kind: type[GitHubError], said: str
) -> None:
    github = ManifestGitHub(answer=answer)
    with pytest.raises(kind) as refused:
        github.conversions().convert(CODE)
    assert type(refused.value) is kind and said in str(refused.value)
    assert len(github.requests) == 1  # the code may be used already: never sent twice
    assert not secrets_in(str(refused.value)) and CODE not in str(refused.value)


@pytest.mark.parametrize(
    ("failures", "error", "attempts", "outcome"),
    [
        ([httpx.ConnectError("refused")] * 2, None, 3, "octoapp"),
        ([httpx.ConnectError("refused")] * 3, GitHubUnavailableError, 3, "cannot connect to"),
        ([httpx.ReadTimeout("slow")], GitHubUnavailableError, 1, "network failure: slow"),
    ],
    ids=["connection retried", "connection never made", "sent, then lost: not retried"],
)
def test_only_requests_that_never_left_are_sent_again(
    failures: list[Exception], error: type[GitHubError] | None, attempts: int, outcome: str
) -> None:
    github = ManifestGitHub(CODE)
    sent: list[httpx.Request] = []
    pending = list(failures)

    def flaky(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if pending:
            raise pending.pop(0)
        return github.handle(request)

    conversions = ManifestConversions(transport=httpx.MockTransport(flaky), sleep=lambda s: None)
    if error is None:
        assert conversions.convert(CODE).slug == outcome
    else:
        with pytest.raises(error, match=outcome):
            conversions.convert(CODE)
    assert len(sent) == attempts


# --- the loopback callback ---------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[ManifestCallbackServer]:
    with ManifestCallbackServer(state=STATE) as serving:
        serving.page = "<form>the page</form>"
        yield serving


def test_it_listens_on_loopback_at_a_free_port(server: ManifestCallbackServer) -> None:
    assert server.port > 0
    assert server.callback_url == f"http://127.0.0.1:{server.port}/callback"


@pytest.mark.parametrize(
    ("target", "host", "status", "said"),
    [
        ("/", "127.0.0.1:{port}", 200, "<form>the page</form>"),
        ("/", "localhost:{port}", 200, "<form>the page</form>"),
        ("/", "evil.example:{port}", 421, "only on 127.0.0.1"),
        ("/", None, 421, "only on 127.0.0.1"),
        ("/favicon.ico", "127.0.0.1:{port}", 404, "not found"),
        (f"/callback?code=forged&state=not-{STATE}", "127.0.0.1:{port}", 403, "its code was not used"),
        (f"/callback?state={STATE}", "127.0.0.1:{port}", 400, "no code"),
        (f"/callback?code={CODE}&state={STATE}", "evil.example", 421, "only on 127.0.0.1"),
    ],
    ids=[
        "page",
        "page via localhost",
        "rebound name",
        "no host",
        "other path",
        "state",
        "no code",
        "rebound name, with a code",
    ],
)
def test_what_each_request_is_answered(
    server: ManifestCallbackServer, target: str, host: str | None, status: int, said: str
) -> None:
    got = server.answer(target, host.format(port=server.port) if host else None)
    assert (got[0], said in got[2]) == (status, True)
    with pytest.raises(CallbackTimeoutError):
        server.wait_for_code(0)  # none of them gave a code


def test_the_first_right_callback_is_kept_and_every_other_refused() -> None:
    refusals: list[str] = []
    with ManifestCallbackServer(state=STATE, on_refused=refusals.append) as server:
        server.start()
        base = server.callback_url
        answers = [
            get(f"{base}?{query}").status_code
            for query in (
                urlencode({"code": "forged", "state": "another-run"}),
                urlencode({"state": STATE}),
                urlencode({"code": CODE, "state": STATE}),
                urlencode({"code": "second", "state": STATE}),
            )
        ]
        assert answers == [403, 400, 200, 409]
        assert server.wait_for_code(0) == CODE
    said = ("the state does not match the page", "no code", "Squadron already has the code")
    assert len(refusals) == len(said)
    for reason, start in zip(refusals, said, strict=True):
        assert reason.startswith(start)


def test_no_redirect_in_time_is_a_named_error(server: ManifestCallbackServer) -> None:
    with pytest.raises(CallbackTimeoutError) as late:
        server.wait_for_code(0.01)
    assert late.value.seconds == 0.01
    assert str(CallbackTimeoutError(30)) == "GitHub did not send the browser back within 0.5 min"


# --- squadron app create, end to end -------------------------------------------------------------


class Person:
    """The person at the browser: opens the page, confirms on GitHub, and the browser follows
    GitHub's redirect, after ``strays`` (other requests to the callback, ``{state}`` filled in)."""

    def __init__(self, github: ManifestGitHub, strays: tuple[str, ...] = ()) -> None:
        self.github = github
        self.strays = strays
        self.answers: list[int] = []
        self.action = ""
        self.error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def open(self, url: str) -> bool:
        self._thread = threading.Thread(target=self._act, args=(url,), daemon=True)
        self._thread.start()
        return True

    def _act(self, url: str) -> None:
        try:
            page = get(url).text
            action = re.search(r"<form action='([^']*)' method='post'>", page)
            posted = re.search(r"name='manifest' value='([^']*)'", page)
            assert action is not None and posted is not None
            self.action = unescape(action.group(1))
            state = parse_qs(urlsplit(self.action).query)["state"][0]
            manifest = json.loads(unescape(posted.group(1)))
            code = self.github.create_app(manifest)
            for stray in self.strays:
                stray_url = f"{manifest['redirect_url']}?{stray.format(state=state)}"
                self.answers.append(get(stray_url).status_code)
            redirect = f"{manifest['redirect_url']}?{urlencode({'code': code, 'state': state})}"
            self.answers.append(get(redirect).status_code)
        except BaseException as exc:
            self.error = exc

    def done(self) -> None:
        assert self._thread is not None, "the browser was never opened"
        self._thread.join(timeout=10)
        if self.error is not None:
            raise self.error


@pytest.fixture
def github(monkeypatch: pytest.MonkeyPatch) -> ManifestGitHub:
    fake = ManifestGitHub()
    monkeypatch.setattr(app_cli, "_conversions", fake.conversions)
    return fake


@pytest.fixture
def no_browser(monkeypatch: pytest.MonkeyPatch) -> None:
    def never(url: str) -> bool:
        raise AssertionError(f"a browser was opened at {url}")

    monkeypatch.setattr(app_cli, "_open_browser", never)


def stack_template(**outputs: str) -> str:
    values = {
        "RegistryTableName": "squadron-registry",
        "EventsQueueUrl": "https://sqs.us-east-1.amazonaws.com/1/events.fifo",
        "EventsDeadLetterQueueUrl": "https://sqs.us-east-1.amazonaws.com/1/events-dlq.fifo",
        "GitHubAppPrivateKeySecretName": KEY_SECRET,
        "WebhookSecretName": HOOK_SECRET,
        **outputs,
    }
    return json.dumps(
        {
            "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
            "Outputs": {key: {"Value": value} for key, value in values.items() if value},
        }
    )


@pytest.fixture
def aws() -> Iterator[Any]:
    """The deployed stack Squadron-dev (its two secrets, still holding what the deploy put there)."""
    with mock_aws():
        secrets = boto3.client("secretsmanager")
        secrets.create_secret(Name=KEY_SECRET, SecretString="placeholder")
        secrets.create_secret(Name=HOOK_SECRET, SecretString="generated-at-deploy")
        boto3.client("cloudformation").create_stack(StackName="Squadron-dev", TemplateBody=stack_template())
        yield secrets


def create(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    status = main(["app", "create", "--webhook-url", "https://abc.execute-api/webhook", *argv], out=out)
    return status, out.getvalue()


@pytest.mark.parametrize(
    ("api_url", "posted_to"),
    [
        ("https://api.github.com", "https://github.com/settings/apps/new?state="),
        ("https://ghe.acme.example/api/v3", "https://ghe.acme.example/settings/apps/new?state="),
    ],
    ids=["github.com", "GHE Server"],
)
def test_create_runs_the_whole_flow_into_the_stacks_secrets(  # noqa: PLR0917 (fixtures, then the table)
    aws: Any,
    github: ManifestGitHub,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    api_url: str,
    posted_to: str,
) -> None:
    person = Person(github, strays=("code=forged&state=not-this-run", "state={state}"))
    monkeypatch.setattr(app_cli, "_open_browser", person.open)
    status, said = create(
        "--stack",
        "Squadron-dev",
        "--timeout",
        "0.5",
        "--api-url",
        api_url,
        "--context-file",
        str(tmp_path / "none.json"),
    )
    person.done()
    assert status == 0, said
    assert person.answers == [403, 400, 200]
    assert person.action.startswith(posted_to)
    (manifest,) = github.manifests
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/callback", manifest["redirect_url"])
    assert manifest["hook_attributes"]["url"] == "https://abc.execute-api/webhook"
    assert github.exchanged == [CODE]  # the right code, once; the forged one never
    assert str(github.requests[0].url) == f"{api_url}/app-manifests/{CODE}/conversions"
    app = documented_app()
    assert aws.get_secret_value(SecretId=KEY_SECRET)["SecretString"] == app["pem"]
    assert aws.get_secret_value(SecretId=HOOK_SECRET)["SecretString"] == app["webhook_secret"]
    assert "opened it in your browser" in said
    assert "refused a callback: the state does not match" in said
    assert "refused a callback: no code" in said
    assert "created the GitHub App Octocat App (octoapp, id 1): https://github.com/apps/octoapp" in said
    assert f"stored its private key in {KEY_SECRET} and its webhook secret in {HOOK_SECRET}" in said
    assert "squadron configure --github-app-id 1 --github-app-slug octoapp, then make deploy" in said
    assert "https://github.com/apps/octoapp/installations/new" in said
    assert not secrets_in(said)


@pytest.mark.usefixtures("no_browser")
def test_without_a_stack_the_secrets_go_to_files_only_their_owner_reads(
    tmp_path: Path, github: ManifestGitHub
) -> None:
    github.codes.add(CODE)
    out_dir = tmp_path / "app"
    status, said = create("--code", CODE, "--out-dir", str(out_dir))
    assert status == 0, said
    app = documented_app()
    key, hook = out_dir / "private-key.pem", out_dir / "webhook-secret"
    assert (key.read_text(), hook.read_text()) == (app["pem"], app["webhook_secret"])
    for path in (key, hook):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(out_dir.stat().st_mode) == 0o700
    assert sorted(p.name for p in out_dir.iterdir()) == ["private-key.pem", "webhook-secret"]
    assert f"wrote its private key to {key}, its webhook secret to {hook}" in said
    assert (
        f"--secret-string file://{key}" in said
        and "squadron configure --github-app-id 1 --github-app-slug octoapp" in said
    )
    assert not secrets_in(said)


@pytest.mark.usefixtures("no_browser")
def test_for_the_local_stack_it_writes_the_credentials_squadron_local_takes(
    tmp_path: Path, github: ManifestGitHub
) -> None:
    github.codes.add(CODE)
    status, said = create("--code", CODE, "--local-credentials", "--out-dir", str(tmp_path))
    assert status == 0, said
    credentials_file = tmp_path / "github-app.yaml"
    assert stat.S_IMODE(credentials_file.stat().st_mode) == 0o600
    credentials = load_credentials({}, credentials_file)
    assert credentials is not None
    app = documented_app()
    assert credentials.app_id == 1 and credentials.private_key() == app["pem"]
    assert credentials.webhook_secret.get_secret_value() == app["webhook_secret"]
    assert f"squadron local --github-app {credentials_file}" in said
    assert not secrets_in(said)


@pytest.mark.parametrize(
    ("argv", "template", "status", "said"),
    [
        (["--stack", "Squadron-prod"], None, 3, "no stack Squadron-prod in us-east-1: deploy it"),
        (["--stack", "Squadron-dev"], {"WebhookSecretName": ""}, 3, "has no output WebhookSecretName"),
        (["--stack", "Squadron-dev"], {"GitHubAppId": "123"}, 1, "runs the GitHub App 123 already"),
        (["--timeout", "0"], None, 1, "--timeout 0: minutes to wait"),
        (["--out-dir", "taken"], None, 1, "taken holds private-key.pem already"),
        (["--stack", "Squadron-dev", "--out-dir", "taken"], {}, 1, "taken holds private-key.pem already"),
    ],
    ids=["no such stack", "older stack", "stack runs an App", "no wait", "out dir taken", "fallback taken"],
)
@pytest.mark.usefixtures("no_browser")
def test_what_would_lose_the_secrets_is_refused_before_github_creates_anything(
    github: ManifestGitHub, argv: list[str], template: dict[str, str] | None, status: int, said: str
) -> None:
    Path("taken").mkdir()
    Path("taken/private-key.pem").write_text("another App's")
    with mock_aws():
        if template is not None:
            boto3.client("cloudformation").create_stack(
                StackName="Squadron-dev", TemplateBody=stack_template(**template)
            )
        got, output = create(*argv, "--code", CODE)
    assert (got, said in output) == (status, True), output
    assert github.requests == []  # the code was not used


@pytest.mark.usefixtures("no_browser")
def test_a_stack_running_another_app_takes_the_new_one_when_asked(github: ManifestGitHub) -> None:
    github.codes.add(CODE)
    with mock_aws():
        secrets = boto3.client("secretsmanager")
        for name in (KEY_SECRET, HOOK_SECRET):
            secrets.create_secret(Name=name, SecretString="the old App's")
        boto3.client("cloudformation").create_stack(
            StackName="Squadron-dev", TemplateBody=stack_template(GitHubAppId="123")
        )
        status, said = create("--stack", "Squadron-dev", "--replace", "--code", CODE, "--context-file", "-")
        assert status == 0, said
        assert secrets.get_secret_value(SecretId=KEY_SECRET)["SecretString"] == documented_app()["pem"]


KEPT = [
    # (case id, the context file before, kept there): the App's id and slug are kept for the next
    # deploy only by the file that deploys this very stack
    ("deploys-this-stack", {"stage": "dev", "alarm_email": "ops@example.com"}, True),
    ("deploys-another-stage", {"stage": "prod"}, False),
]


@pytest.mark.usefixtures("no_browser")
@pytest.mark.parametrize(("before", "kept"), [row[1:] for row in KEPT], ids=[row[0] for row in KEPT])
def test_the_apps_id_and_slug_are_kept_for_the_next_deploy(
    aws: Any, github: ManifestGitHub, tmp_path: Path, before: dict[str, str], kept: bool
) -> None:
    github.codes.add(CODE)
    context = tmp_path / "cdk.context.json"
    context.write_text(json.dumps(before))
    status, said = create("--stack", "Squadron-dev", "--code", CODE, "--context-file", str(context))
    assert status == 0, said
    after = json.loads(context.read_text())
    if kept:
        assert after == {**before, "github_app_id": "1", "github_app_slug": "octoapp"}
        assert f"kept its id and slug in {context} for the next deploy" in said
        assert "  1. deploy the stack as this App: make deploy" in said
    else:
        assert after == before
        assert "squadron configure --github-app-id 1 --github-app-slug octoapp, then make deploy" in said


@pytest.mark.usefixtures("no_browser")
def test_secrets_the_stack_refuses_are_written_to_files_instead(
    tmp_path: Path, github: ManifestGitHub
) -> None:
    github.codes.add(CODE)
    with mock_aws():  # the stack names secrets that are not there
        boto3.client("cloudformation").create_stack(StackName="Squadron-dev", TemplateBody=stack_template())
        status, said = create("--stack", "Squadron-dev", "--code", CODE, "--out-dir", str(tmp_path))
    assert status == 3
    assert (
        f"could not store them in the stack's secrets: storing the App's private key in {KEY_SECRET}" in said
    )
    assert f"--secret-id {KEY_SECRET} --secret-string file://{tmp_path / 'private-key.pem'}" in said
    assert f"--secret-id {HOOK_SECRET} --secret-string file://{tmp_path / 'webhook-secret'}" in said
    assert stat.S_IMODE((tmp_path / "private-key.pem").stat().st_mode) == 0o600
    assert not secrets_in(said)


def test_store_app_credentials_writes_only_the_new_values(aws: Any) -> None:
    operations = Operations(stack_target("Squadron-dev"))
    operations.store_app_credentials(private_key="PEM", webhook_secret=None)
    assert aws.get_secret_value(SecretId=KEY_SECRET)["SecretString"] == "PEM"
    assert aws.get_secret_value(SecretId=HOOK_SECRET)["SecretString"] == "generated-at-deploy"
    bare = Operations(dataclasses.replace(stack_target("Squadron-dev"), webhook_secret=None))
    with pytest.raises(OperatorError, match="does not name its GitHub App secrets"):
        bare.store_app_credentials(private_key="PEM", webhook_secret="w")


@pytest.mark.parametrize(
    ("answer", "status", "said"),
    [
        (
            None,
            1,
            "GitHub refused the code: POST /app-manifests/{code}/conversions: GitHub answered 404: Not Found "
            "(a code works once, within an hour;",
        ),
        (
            httpx.Response(422, json={"message": "Validation Failed", "documentation_url": DOCS}),
            1,
            "GitHub refused the code: POST /app-manifests/{code}/conversions: GitHub answered 422: Validation "
            "Failed",
        ),
        (httpx.Response(503, text="unavailable"), 3, "cannot reach GitHub:"),
    ],
    ids=["used or expired", "refused", "unavailable"],
)
@pytest.mark.usefixtures("no_browser")
def test_githubs_refusal_is_one_line_with_its_message(
    github: ManifestGitHub, answer: httpx.Response | None, status: int, said: str
) -> None:
    github.answer = answer
    got, output = create("--code", "c0de-0f-an-hour-ago", "--out-dir", "app")
    assert got == status
    assert output.startswith(said) and output.count("\n") == 1
    assert "c0de-0f-an-hour-ago" not in output
    assert not Path("app").exists()


@pytest.mark.usefixtures("no_browser")
def test_no_redirect_in_time_exits_4_without_using_github(github: ManifestGitHub) -> None:
    status, said = create("--no-browser", "--timeout", "0.0002")
    assert status == 4
    assert "open http://127.0.0.1:" in said and "GitHub did not send the browser back within" in said
    assert "run again with --code CODE within the hour" in said
    assert github.requests == []


@pytest.mark.usefixtures("no_browser")
def test_a_busy_port_is_said(github: ManifestGitHub) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        status, said = create("--no-browser", "--port", str(port))
    assert status == 3 and said.startswith(f"cannot listen on 127.0.0.1:{port}")


# --- where the key material goes by default (issue 32 item 6) ----------------------------------


@pytest.mark.usefixtures("no_browser")
def test_by_default_the_key_goes_to_the_stage_s_own_directory_outside_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, github: ManifestGitHub
) -> None:
    """No --out-dir: the private key and webhook secret go to the user's directory of the stage the
    checkout deploys, every directory made 0700 and each file 0600; the checkout gets nothing."""
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    (checkout / "cdk.context.json").write_text('{"stage": "prod"}')
    monkeypatch.chdir(checkout)
    github.codes.add(CODE)
    status, said = create("--code", CODE)
    assert status == 0, said
    config = tmp_path / "home" / ".config"
    kept = config / "squadron" / "prod" / "github-app"
    key, hook = kept / "private-key.pem", kept / "webhook-secret"
    app = documented_app()
    assert (key.read_text(), hook.read_text()) == (app["pem"], app["webhook_secret"])
    assert [stat.S_IMODE(p.stat().st_mode) for p in (key, hook)] == [0o600, 0o600]
    made = [config / "squadron", config / "squadron" / "prod", kept]
    assert [stat.S_IMODE(p.stat().st_mode) for p in made] == [0o700] * 3
    assert sorted(p.name for p in checkout.iterdir()) == [".git", "cdk.context.json"]
    assert f"wrote its private key to {key}" in said
    assert not secrets_in(said)


GIT_TREES = [
    # (id, .git in the tree as, --out-dir under the tree or None for the default with the user's
    #  config directory inside it, more arguments, refused)
    ("a-repository", "dir", "keys", [], True),
    ("a-worktree-or-submodule", "file", "deep/keys", [], True),
    ("the-default-inside-a-tree", "dir", None, [], True),
    ("forced", "dir", "keys", ["--allow-work-tree"], False),
]


@pytest.mark.parametrize("case", [case[1:] for case in GIT_TREES], ids=[case[0] for case in GIT_TREES])
@pytest.mark.usefixtures("no_browser")
def test_a_key_directory_inside_a_git_work_tree_is_refused_before_github_creates_anything(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    github: ManifestGitHub,
    case: tuple[str, str | None, list[str], bool],
) -> None:
    git, under, more, refused = case
    tree = tmp_path / "tree"
    tree.mkdir()
    if git == "dir":
        (tree / ".git").mkdir()
    else:
        (tree / ".git").write_text("gitdir: /elsewhere/.git/worktrees/tree\n")
    if under is None:
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tree / "config"))
        out = []
        target = tree / "config" / "squadron" / "dev" / "github-app"
    else:
        out = ["--out-dir", str(tree / under)]
        target = tree / under
    github.codes.add(CODE)
    status, said = create("--code", CODE, *out, *more)
    if refused:
        assert status == 1, said
        assert said == (
            f"{target} is inside the git work tree {tree}: the App's private key there could be committed or "
            "copied into an image; pass an --out-dir outside it, or --allow-work-tree to write it there anyway\n"
        )
        assert github.requests == []  # nothing created on GitHub, nothing written
        assert not target.exists()
    else:
        assert status == 0, said
        assert (target / "private-key.pem").read_text() == documented_app()["pem"]
