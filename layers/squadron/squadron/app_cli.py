"""``squadron app manifest|create``: the GitHub App's manifest, and the flow that creates the App.

`squadron app create` runs GitHub's manifest flow: a page on 127.0.0.1 posts the manifest to
GitHub, GitHub sends the browser back with a code, the code is exchanged for the App's private
key and webhook secret, which go into the stack's secrets (``--stack``) or files only their
owner may read. No redirect in time exits with 4; GitHub refusing the code with 1; a stack that
cannot be reached with 3.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from squadron.cli_types import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_TIMED_OUT,
    EXIT_UNAVAILABLE,
    port,
)
from squadron.deployment import APP_PRIVATE_KEY_FILE
from squadron.domain.app_manifest import GITHUB_API_URL

if TYPE_CHECKING:
    from squadron.adapters.github.manifests import ManifestConversions
    from squadron.adapters.operations import Target
    from squadron.domain.app_manifest import CreatedApp, FilesWritten


#: The files ``squadron app create`` writes without --stack (only their owner may read them).
PRIVATE_KEY_FILE = APP_PRIVATE_KEY_FILE
WEBHOOK_SECRET_FILE = "webhook-secret"  # noqa: S105 (a file name)
CREDENTIALS_FILE = "github-app.yaml"


def configure_app(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        choices=("manifest", "create"),
        help="manifest: print it; create: create the App through GitHub's manifest flow, then store its "
        "private key and webhook secret",
    )
    parser.add_argument("--webhook-url", required=True, help="the stack's WebhookUrl output (https)")
    parser.add_argument(
        "--name", default="squadron", help="the App's name, unique on GitHub (default: squadron)"
    )
    parser.add_argument("--org", help="create it in this organization (default: your account)")
    parser.add_argument("--homepage", default="https://github.com", help="the App's homepage URL")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--stack",
        help="with create: store the private key and webhook secret in this deployed stack's secrets "
        "(default: write them to files in --out-dir)",
    )
    # Not --local: everywhere else that names the running local stack, which creating an App never
    # touches; this writes a file for running `squadron local` against real GitHub as the new App.
    where.add_argument(
        "--local-credentials",
        action="store_true",
        help="with create: also write the credentials file of `squadron local --github-app` (the local stack "
        "against real GitHub, as the new App) to --out-dir",
    )
    # argparse would take a bare --local as an abbreviation of --local-credentials, silently: it is
    # refused with the reason instead (--local names the running local stack in every other command).
    parser.add_argument("--local", nargs=0, action=_NotLocal, help=argparse.SUPPRESS)
    parser.add_argument(
        "--region",
        help="with --stack: its AWS region (default: where `cdk deploy` deploys that stage: its own region "
        "in --context-file, else $AWS_REGION, $AWS_DEFAULT_REGION, the profile's, us-east-1)",
    )
    parser.add_argument(
        "--replace",
        action="store_true",
        help="with --stack: store the new App's secrets even though the stack runs another App",
    )
    parser.add_argument(
        "--out-dir",
        help="with create and no --stack: where the private key and webhook secret go (default: the stage's "
        "own directory outside the checkout, $XDG_CONFIG_HOME/squadron/<stage>/github-app, ~/.config by default)",
    )
    parser.add_argument(
        "--allow-work-tree",
        action="store_true",
        help="with --out-dir: write the key material there even inside a git work tree (refused otherwise: "
        "a commit or an image build could take it)",
    )
    parser.add_argument(
        "--port", type=port, default=0, help="with create: the local callback's port (default: any free one)"
    )
    parser.add_argument("--no-browser", action="store_true", help="with create: only print the page's URL")
    parser.add_argument(
        "--timeout",
        type=float,
        default=15.0,
        help="with create: minutes to wait for GitHub to send the browser back (default: 15)",
    )
    parser.add_argument(
        "--code",
        help="with create: exchange this code (the ?code= of GitHub's redirect, within the hour) instead "
        "of waiting for the redirect",
    )
    parser.add_argument(
        "--api-url",
        default=os.environ.get("GITHUB_API_URL", GITHUB_API_URL),
        help="GitHub's REST API (default: $GITHUB_API_URL or https://api.github.com)",
    )
    parser.add_argument("--github-url", help="GitHub's web address (default: derived from --api-url)")
    parser.add_argument(
        "--page-only",
        action="store_true",
        help="with create: only write the page that creates the App (no local callback), then finish by hand",
    )
    parser.add_argument(
        "--out", help="with --page-only (implied): where to write the page (default: squadron-app.html)"
    )
    parser.add_argument(
        "--context-file",
        default="cdk.context.json",
        help="with create --stack: keep the App's id and slug there for the next deploy when that file "
        "deploys this stack (default: ./cdk.context.json)",
    )


class _NotLocal(argparse.Action):
    """``squadron app ... --local``: a usage error that names the flag meant."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        parser.error(
            "--local: creating an App never touches the running local stack (--local names it in every other "
            "command); to also write the credentials file of `squadron local --github-app` for the new App, "
            "pass --local-credentials"
        )


def run_app(args: argparse.Namespace, out: TextIO) -> int:
    from squadron.domain.app_manifest import manifest  # noqa: PLC0415

    if not args.webhook_url.startswith("https://"):
        out.write(
            f"--webhook-url {args.webhook_url}: GitHub delivers webhooks to an https URL (the stack's WebhookUrl)\n"
        )
        return EXIT_PROBLEMS
    if args.action == "manifest":
        body = manifest(name=args.name, webhook_url=args.webhook_url, homepage=args.homepage)
        out.write(json.dumps(body, indent=2) + "\n")
        return EXIT_OK
    if args.page_only or args.out is not None:
        return _write_page(args, out)
    return _create_app(args, out)


def _web_url(args: argparse.Namespace) -> str:
    from squadron.domain.app_manifest import web_url_for  # noqa: PLC0415

    return str(args.github_url or web_url_for(args.api_url)).rstrip("/")


def _write_page(args: argparse.Namespace, out: TextIO) -> int:
    from squadron.domain.app_manifest import creation_url, manifest, manifest_form  # noqa: PLC0415

    body = manifest(name=args.name, webhook_url=args.webhook_url, homepage=args.homepage)
    page = Path(args.out or "squadron-app.html")
    page.write_text(manifest_form(body, args.org, web_url=_web_url(args)), encoding="utf-8")
    out.write(
        f"wrote {page}: open it in a browser and press the button; GitHub "
        f"({creation_url(args.org, web_url=_web_url(args))}) shows the\n"
        "App's permissions and events before it creates it. Then, on the App's settings page:\n"
        "  1. note the App ID and generate a private key (a .pem file downloads);\n"
        "  2. set a webhook secret (e.g. `openssl rand -hex 32`);\n"
        "  3. store both in the stack's secrets (names in its outputs):\n"
        "       aws secretsmanager put-secret-value --secret-id <GitHubAppPrivateKeySecretName> "
        "--secret-string file://app.pem\n"
        "       aws secretsmanager put-secret-value --secret-id <WebhookSecretName> --secret-string <secret>\n"
        "  4. deploy as the App: squadron configure --github-app-id <App ID> --github-app-slug <slug>, then "
        "make deploy\n"
        "  5. install the App on each repository it should work in (Install App -> Only select repositories).\n"
    )
    return EXIT_OK


def _conversions(api_url: str) -> ManifestConversions:
    from squadron.adapters.github.manifests import ManifestConversions  # noqa: PLC0415 (httpx, lazily)

    return ManifestConversions(base_url=api_url)


def _open_browser(url: str) -> bool:
    """Open ``url`` in a graphical browser, when this machine has one (a console browser would
    take over the terminal that is waiting)."""
    import webbrowser  # noqa: PLC0415

    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        return False
    try:
        return webbrowser.open(url)
    except webbrowser.Error:
        return False


def _create_app(args: argparse.Namespace, out: TextIO) -> int:
    """The manifest flow, end to end: check where the secrets go, serve the page, take GitHub's
    redirect, exchange its code, store the private key and webhook secret, say what is left."""
    from squadron.adapters.github.errors import GitHubError, GitHubUnavailableError  # noqa: PLC0415
    from squadron.adapters.operations import Operations, OperatorError, stack_target  # noqa: PLC0415
    from squadron.domain.app_manifest import SecretsStored, created_report  # noqa: PLC0415

    if not math.isfinite(args.timeout) or args.timeout <= 0:
        out.write(f"--timeout {args.timeout:g}: minutes to wait, more than 0\n")
        return EXIT_PROBLEMS
    # Where the secrets go is checked before GitHub creates anything: they are shown only once.
    target: Target | None = None
    out_dir, refused = _key_directory(args)
    if refused:
        out.write(refused + "\n")
        return EXIT_PROBLEMS
    if args.stack:
        try:
            target = stack_target(args.stack, region=args.region or _stack_region(args))
        except OperatorError as exc:
            out.write(f"{exc}\n")
            return EXIT_UNAVAILABLE
        if target.webhook_secret is None:
            out.write(
                f"stack {args.stack} has no output WebhookSecretName: deploy its current version first\n"
            )
            return EXIT_UNAVAILABLE
        if target.app_id is not None and not args.replace:
            out.write(
                f"stack {args.stack} runs the GitHub App {target.app_id} already: its secrets hold that App's "
                "key; pass --replace to store a new App's over them (then deploy with the new id)\n"
            )
            return EXIT_PROBLEMS
    # Files are never overwritten; with --stack they are where the secrets go should it refuse them.
    taken = [name for name in _secret_files(args.local_credentials) if (out_dir / name).exists()]
    if taken:
        out.write(
            f"{out_dir} holds {', '.join(taken)} already (another App's?): move them away or pass "
            "another --out-dir\n"
        )
        return EXIT_PROBLEMS

    code = args.code or _wait_for_code(args, out)
    if isinstance(code, int):
        return code

    conversions = _conversions(args.api_url)
    try:
        app = conversions.convert(code)
    except GitHubUnavailableError as exc:
        out.write(
            f"cannot reach GitHub: {exc}; the code stays valid for an hour after GitHub's redirect: the "
            "browser's address bar shows it (...?code=...): run again with --code CODE\n"
        )
        return EXIT_UNAVAILABLE
    except GitHubError as exc:
        out.write(
            f"GitHub refused the code: {exc} (a code works once, within an hour; if GitHub created the App, "
            "generate its private key on its settings page and finish as `squadron app create --page-only` says)\n"
        )
        return EXIT_PROBLEMS
    finally:
        conversions.close()

    status = EXIT_OK
    failure: str | None = None
    if target is not None:
        try:
            Operations(target).store_app_credentials(
                private_key=app.pem.get_secret_value(),
                webhook_secret=app.webhook_secret.get_secret_value() if app.webhook_secret else None,
            )
        except OperatorError as exc:
            failure, status = str(exc), EXIT_UNAVAILABLE
        else:
            assert target.private_key_secret is not None and target.webhook_secret is not None
            out.write(
                created_report(
                    app,
                    SecretsStored(args.stack, target.private_key_secret, target.webhook_secret),
                    recorded=_keep_for_deploy(Path(args.context_file), args.stack, app),
                )
            )
            return EXIT_OK
    try:
        where = _write_secret_files(app, out_dir, args, target=target, failure=failure)
    except OSError as exc:
        out.write(
            f"created the GitHub App {app.slug} (id {app.id}) but could not write its secrets to {out_dir}: "
            f"{exc}; generate a private key on its settings page ({app.html_url})\n"
        )
        return EXIT_PROBLEMS
    out.write(created_report(app, where))
    return status


def _key_directory(args: argparse.Namespace) -> tuple[Path, str]:
    """Where the App's private key and webhook secret go, and why not (empty: they may): --out-dir,
    else the stage's own directory outside the checkout (the stage of --stack, else the one the
    checkout deploys). Inside a git work tree only with --allow-work-tree. What is made of it is
    made 0700, the files 0600."""
    from squadron.deployment import SettingsError, app_key_directory, deployed, work_tree_of  # noqa: PLC0415
    from squadron.errors import ConfigurationError  # noqa: PLC0415

    if args.out_dir is not None:
        out_dir = Path(args.out_dir)
    else:
        stage = args.stack.removeprefix("Squadron-") if args.stack else None
        try:
            stage = stage or deployed(Path(args.context_file), environ=os.environ, home=Path.home()).stage
        except (SettingsError, ConfigurationError):
            stage = "dev"
        out_dir = app_key_directory(stage, environ=os.environ, home=Path.home())
    tree = work_tree_of(out_dir)
    if tree is not None and not args.allow_work_tree:
        return out_dir, (
            f"{out_dir} is inside the git work tree {tree}: the App's private key there could be committed or "
            "copied into an image; pass an --out-dir outside it, or --allow-work-tree to write it there anyway"
        )
    return out_dir, ""


def _stack_region(args: argparse.Namespace) -> str | None:
    """Where `cdk deploy` deploys ``--stack`` Squadron-<stage> from the checkout of --context-file:
    the stage's own region, else the CDK CLI's (squadron.deployment.deployed); None for another name."""
    from squadron.deployment import SettingsError, cdk_default_region, deployed  # noqa: PLC0415
    from squadron.errors import ConfigurationError  # noqa: PLC0415

    stage = args.stack.removeprefix("Squadron-") if args.stack.startswith("Squadron-") else None
    try:
        if stage is None:
            return cdk_default_region(os.environ, Path.home())[0]
        return deployed(Path(args.context_file), stage=stage, environ=os.environ, home=Path.home()).region
    except (SettingsError, ConfigurationError):
        return None


def _keep_for_deploy(path: Path, stack: str, app: CreatedApp) -> str | None:
    """Keep the App's id and slug in the context file ``path`` when it deploys ``stack``; where, or
    None (no such file, another stage's, or unreadable: the report says what to run instead)."""
    from squadron.deployment import DeploymentSettings, configure, read_context  # noqa: PLC0415
    from squadron.errors import ConfigurationError  # noqa: PLC0415

    try:
        if not path.exists() or DeploymentSettings.from_mapping(read_context(path)).stack_name != stack:
            return None
        configure(path, {"github_app_id": str(app.id), "github_app_slug": app.slug})
    except (ConfigurationError, OSError):
        return None
    return str(path)


def _secret_files(local_credentials: bool) -> tuple[str, ...]:
    return (PRIVATE_KEY_FILE, WEBHOOK_SECRET_FILE, *((CREDENTIALS_FILE,) if local_credentials else ()))


def _wait_for_code(args: argparse.Namespace, out: TextIO) -> str | int:
    """The code GitHub's redirect brings to the loopback callback, or the exit status."""
    import secrets  # noqa: PLC0415

    from squadron.adapters.manifest_callback import (  # noqa: PLC0415
        CallbackTimeoutError,
        ManifestCallbackServer,
    )
    from squadron.domain.app_manifest import (  # noqa: PLC0415
        creation_url,
        manifest,
        manifest_form,
        waiting_banner,
    )

    def refused(reason: str) -> None:
        out.write(f"refused a callback: {reason}; still waiting\n")

    state = secrets.token_urlsafe(32)
    web_url = _web_url(args)
    try:
        server = ManifestCallbackServer(state=state, port=args.port, on_refused=refused)
    except OSError as exc:
        out.write(f"cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}; pass another --port\n")
        return EXIT_UNAVAILABLE
    with server:
        body = manifest(
            name=args.name,
            webhook_url=args.webhook_url,
            homepage=args.homepage,
            redirect_url=server.callback_url,
        )
        server.page = manifest_form(body, args.org, state=state, web_url=web_url)
        server.start()
        page_url = server.base_url + "/"
        out.write(
            waiting_banner(
                page_url=page_url,
                posts_to=creation_url(args.org, web_url=web_url),
                port=server.port,
                timeout_minutes=args.timeout,
            )
        )
        if not args.no_browser and _open_browser(page_url):
            out.write("opened it in your browser\n")
        out.flush()
        try:
            return server.wait_for_code(args.timeout * 60)
        except CallbackTimeoutError as exc:
            out.write(
                f"{exc}: GitHub created nothing unless you confirmed there; if you did, the browser's address "
                "bar shows the code (...?code=...): run again with --code CODE within the hour\n"
            )
            return EXIT_TIMED_OUT
        except KeyboardInterrupt:
            out.write("stopped: no code was exchanged\n")
            return EXIT_INTERRUPTED


def _write_secret_files(
    app: CreatedApp, out_dir: Path, args: argparse.Namespace, *, target: Target | None, failure: str | None
) -> FilesWritten:
    """The private key and webhook secret (and with --local the credentials file) as new files only
    their owner may read."""
    import yaml  # noqa: PLC0415

    from squadron.domain.app_manifest import FilesWritten, local_credentials  # noqa: PLC0415

    for directory in (*reversed(out_dir.parents), out_dir):  # what is made here, only its owner enters
        if not directory.exists():
            directory.mkdir(mode=0o700)
            os.chmod(directory, 0o700)  # whatever the umask
    key_path = out_dir / PRIVATE_KEY_FILE
    _write_private(key_path, app.pem.get_secret_value())
    secret_path: Path | None = None
    if app.webhook_secret is not None:
        secret_path = out_dir / WEBHOOK_SECRET_FILE
        # No newline: the webhook secret is the file's exact content (aws ... file://).
        _write_private(secret_path, app.webhook_secret.get_secret_value())
    credentials_path: Path | None = None
    if args.local_credentials and app.webhook_secret is not None:
        credentials_path = out_dir / CREDENTIALS_FILE
        values = local_credentials(
            app_id=app.id,
            private_key_file=str(key_path.resolve()),
            webhook_secret=app.webhook_secret.get_secret_value(),
            api_url=args.api_url,
        )
        _write_private(credentials_path, yaml.safe_dump(values, sort_keys=False))
    names = {}
    if target is not None and target.private_key_secret and target.webhook_secret:
        names = {
            "private_key_secret": target.private_key_secret,
            "webhook_secret_name": target.webhook_secret,
        }
    return FilesWritten(
        private_key=str(key_path),
        webhook_secret=str(secret_path) if secret_path else None,
        credentials=str(credentials_path) if credentials_path else None,
        stack_failure=failure,
        **names,
    )


def _write_private(path: Path, text: str) -> None:
    """``text`` as a new file (never over an existing one) only its owner may read and write."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(text)
