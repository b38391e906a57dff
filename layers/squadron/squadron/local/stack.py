"""The local stack: the AWS shape on one machine, running the same handlers and agent host.

- AWS: a moto server on loopback, provisioned like the CDK stack (events.fifo
  with its DLQ, the registry table, the secrets, an ECS cluster).
- Ingress: an HTTP endpoint that hands each request to the ingress Lambda
  handler exactly as API Gateway would (payload format 2.0).
- Router: a worker that long-polls events.fifo and invokes the router Lambda
  handler with SQS-shaped batches, deleting only what succeeded (partial
  batch failures honoured; a failed record comes back after its visibility
  timeout and goes to the DLQ after five receives).
- Reconciler: its Lambda handler on a timer.
- Domain events: the publisher's code on the registry's stream, onto a local bus whose rules
  write every event to a log group and put it on the dashboards queue, which a worker hands to
  the dashboards Lambda handler (each repository's dashboard issue, at most once a minute).
- Agent gateway: its Lambda handler behind the Lambda Invoke API on loopback,
  which agent processes reach through ``AWS_ENDPOINT_URL_LAMBDA`` (their only
  AWS endpoint, as the task role's only right in AWS).
- Agents: local processes (``python -m squadron.agent``) started by the local
  launcher, with the real Copilot CLI talking to the scripted model. Run as
  root (CI), each agent's CLI, shell and git run as its own user, as in ECS;
  run as anyone else, as that one user (stated when the stack starts).
  The moto server has no IAM: it is no containment boundary here (in AWS the
  task role holds no rights on the registry or the queue).
- GitHub: the sandbox (:mod:`squadron.local.sandbox`), whose webhooks go to
  the ingress endpoint.

State lives in one directory. A stop saves what lives only in memory (the
sandbox's issues, pull requests and deliveries; the registry's items and the
queues' messages) under ``saved/``; git repositories, Copilot sessions and
working copies are on disk already. A start resumes from it: agents that were
running when the stack stopped are relaunched by a reconciler run at once (as
in AWS after their tasks died), resuming their sessions. A stack killed
without its stop (SIGKILL) saves nothing: the next start has what the last
clean stop saved.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import stat
import sys
import threading
import time
import warnings
from collections.abc import Callable
from datetime import datetime
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TextIO

from squadron.adapters.confinement import traversable
from squadron.adapters.ecs import EcsTaskLauncher
from squadron.adapters.event_bus import EventBusPublisher, StreamReader, committed_events
from squadron.adapters.local_aws import (
    LocalResources,
    MotoProcess,
    QueuePoller,
    fire_schedule,
    provision,
    restore_state,
    save_state,
)
from squadron.adapters.local_launcher import LocalLauncher
from squadron.adapters.operations import ENDPOINTS_FILE, Target
from squadron.adapters.zygote import Zygote
from squadron.adapters.zygote import enabled as zygote_enabled
from squadron.domain.repo_volumes import REPOS_DIRECTORY
from squadron.domain.schedules import schedule_name
from squadron.local.copilot_cli import cli_paths, unpack_cli
from squadron.local.examples import first_examples
from squadron.local.invocation import invoke
from squadron.local.lambda_events import FakeLambdaContext, http_api_event, load_handler, sqs_lambda_event
from squadron.local.model import LocalModel
from squadron.local.sandbox import GitHubSandbox
from squadron.local.showcase import StandInCI
from squadron.local.state_lock import StateLock
from squadron.local.wiring import (
    APP_ID,
    APP_SLUG,
    GATEWAY_FUNCTION,
    HUMANS,
    INSTALLATION_ID,
    LAMBDA_SERVICE,
    WEBHOOK_SECRET,
    LocalOptions,
    agent_environment,
    app_slug,
    lambda_environment,
    private_key,
)

logger = logging.getLogger(__name__)

#: The stage in the local bus's events, and how often the local publisher reads the stream.
LOCAL_STAGE = "local"
PUBLISH_SECONDS = 0.5


class LocalStack:
    def __init__(self, options: LocalOptions) -> None:
        self.options = options
        self.moto: MotoProcess | None = None
        self.resources: LocalResources | None = None
        self.sandbox: GitHubSandbox | None = None
        # Its key, as a provider's: only the agent host's model gateway holds it (never the CLI).
        self.model = LocalModel(options.model_policy, key=f"sk-local-{secrets.token_urlsafe(24)}")
        self.launcher: LocalLauncher | None = None
        #: What forks agent processes (the launcher stops it; None with an agent runtime of its own).
        self._zygote: Zygote | None = None
        self.endpoint_server: ThreadingHTTPServer | None = None
        self.endpoint = ""
        self.app_id, self.app_slug = APP_ID, APP_SLUG
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.routed: list[dict[str, Any]] = []
        #: The ``time.monotonic()`` at which the ingress accepted each delivery id (first time).
        self.accepted_at: dict[str, float] = {}
        self.errors: list[str] = []
        #: Cleared, the router's poller receives nothing (events pile up in events.fifo).
        self.routing = threading.Event()
        self.routing.set()
        self._poller_paused = threading.Event()
        #: Faults to inject: each entry makes the next batch of more records than it says crash
        #: after processing that many (the Lambda died: the whole batch comes back later).
        self.router_crashes: list[int] = []
        #: The message ids of each batch that crashed.
        self.crashed: list[list[str]] = []
        #: The message ids of each batch whose router run passed its timeout and was abandoned.
        self.timed_out: list[list[str]] = []
        #: The process environment before start (the in-process Lambdas read theirs from it).
        self._saved_env: dict[str, str | None] = {}
        self._log_file: TextIO | None = None
        self._log_handler: logging.Handler | None = None
        self._redirected: list[tuple[logging.StreamHandler[Any], Any]] = []
        #: Where a stop saves the sandbox's and AWS's state, and a start resumes it from.
        self.github_state = options.state_dir / "saved" / "github.json"
        self.aws_state = options.state_dir / "saved" / "aws.json"
        #: Whether the sandbox's port was taken, so that it serves on another.
        self.sandbox_port_taken = False
        #: What a start restored (registry items, queued messages), None on a first start.
        self.restored: dict[str, int] | None = None
        #: The state directory's lock, held from start to stop (None: not taken).
        self._lock: StateLock | None = None

    # --- start ---------------------------------------------------------------------------------

    def start(self) -> None:
        # Metrics are off here (POWERTOOLS_METRICS_DISABLED): the handlers publish nothing, and
        # Powertools would say so on stderr after every invocation.
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        state = self.options.state_dir
        state.mkdir(parents=True, exist_ok=True)
        # First, before anything starts: a second stack on this state is refused (StateInUseError).
        self._lock = StateLock.take(state)
        github = self.options.github
        # Agent processes are forks of one that imported the agent host while the stack starts
        # (about 3 s of imports each otherwise; SQUADRON_ZYGOTE=0: each started afresh). Its
        # interpreter starts as theirs would have: the same PATH, PYTHONPATH and HOME
        # (squadron.local.wiring.agent_environment), and nothing else (no secret: see the module).
        zygote = self._zygote = (
            Zygote(
                "squadron.agent",
                env={
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "HOME": str(state / "home"),
                    "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
                },
                log=state / "logs" / "agent-zygote.log",
            )
            if self.options.agent_runtime is None and zygote_enabled(os.environ)
            else None
        )
        self.moto = MotoProcess(state / "logs" / "moto.log", wait_scale=self.options.wait_scale)
        aws = self.moto.start()
        self._set_env(
            {
                "AWS_ACCESS_KEY_ID": "local",
                "AWS_SECRET_ACCESS_KEY": "local",
                "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_ENDPOINT_URL": aws,
            }
        )
        self.resources = provision(
            aws,
            webhook_secret=github.webhook_secret.get_secret_value() if github else WEBHOOK_SECRET,
            private_key_pem=github.private_key() if github else private_key(state / "app-key.pem"),
            visibility_timeout=self.options.visibility_timeout,
            copilot_token=self.options.copilot_token,
        )
        self._serve_endpoint()
        if github is None:
            github_url, self.app_id, self.app_slug = self._start_sandbox(), APP_ID, APP_SLUG
            remote = str(state / "github" / "git" / "{repo}.git")
        else:
            github_url, self.app_id, remote = (
                github.api_url.rstrip("/"),
                github.app_id,
                github.git_remote_template,
            )
            self.app_slug = app_slug(github_url, github.app_id, github.private_key())
        model_url = self.model.start() if self.options.copilot_token is None else None
        self._set_env(
            lambda_environment(
                self.resources,
                self.options,
                app_id=self.app_id,
                app_slug=self.app_slug,
                github_url=github_url,
            )
        )
        if self.aws_state.exists():
            self.restored = restore_state(self.resources, self.aws_state)
        for name in ("ingress", "router", "gateway", "reconciler", "dashboard"):
            # Imported once here, not by whichever thread needs one first: importing the same
            # package from two threads at once can see it half-initialised.
            self._handler(name)
        self._log_to(state / "logs" / "lambdas.log")
        self._prepare_agents_root()
        self.launcher = LocalLauncher(
            ecs=EcsTaskLauncher(
                cluster=self.resources.cluster_arn,
                task_definition=self.resources.task_definition_arn,
                container_name="agent",
                subnets=self.resources.subnets,
                security_groups=self.resources.security_groups,
            ),
            env=agent_environment(
                self.options,
                endpoint=self.endpoint,
                agents_root=self.agents_root,
                github_url=github_url,
                model_url=model_url,
                model_key=self.model.key,
                remote=remote,
            ),
            log_dir=state / "logs",
            agents_root=self.agents_root,
            zygote=zygote,
            **({"command": self.options.agent_runtime.command} if self.options.agent_runtime else {}),
        )
        if zygote is not None and not zygote.ready():
            raise RuntimeError(f"the agents' zygote did not start; see {zygote.log}")
        self._loop(self._route_forever)
        self._loop(self._publish_forever)
        self._loop(self._dashboards_forever)
        self._loop(self._reconcile_forever)
        if self.options.stand_in_ci and self.sandbox is not None:
            self._loop(self._ci_forever)
        # Where `squadron status --local` finds this stack (removed when it stops).
        Target(
            table_name=self.resources.table_name,
            queue_url=self.resources.queue_url,
            dead_letter_queue_url=self.resources.dead_letter_queue_url,
            endpoint=aws,
            region="us-east-1",
            app_id=self.app_id,
            private_key_secret=self.resources.private_key_arn,
            github_api_url=github_url,
            event_log_group=self.resources.event_log_group,
            pipeline_prefix=self.resources.pipelines_prefix,  # the one the Lambdas publish under
            pipeline_role_arn=self.resources.pipelines_role_arn,
        ).write(state)

    @property
    def agents_root(self) -> Path:
        """Every agent's directory and the framework's clones (the EFS volume's stand-in)."""
        return self.options.state_dir / "agents"

    def repo_root(self, repo_id: int) -> Path:
        """One repository's agents' root (each task's SQUADRON_AGENTS_ROOT; an access point's
        root on AWS): its agents' directories and the framework's clones."""
        return self.agents_root / REPOS_DIRECTORY / str(repo_id)

    @property
    def separate_users(self) -> bool:
        """Whether agents' processes run as their own users (the stack runs as root)."""
        return os.geteuid() == 0

    def _prepare_agents_root(self) -> None:
        """As in ECS, agents' users must reach their own directory: every directory above the
        agents' root lets others pass (never list). The CLI's package is unpacked once, by the
        stack, so agents' users only ever read it."""
        root = self.agents_root
        root.mkdir(parents=True, exist_ok=True)
        if not self.separate_users:
            logger.warning(
                "not running as root: agents' Copilot CLI, shell and git run as this user "
                "(no per-agent users; the containment tests need root)"
            )
            return
        if self.options.agent_runtime is None:  # a runtime of its own brings its own unpacked CLI
            unpack_cli(*cli_paths(self.options.root))
        blocked = traversable(root)
        while blocked is not None:
            os.chmod(blocked, os.stat(blocked).st_mode | stat.S_IXOTH)
            blocked = traversable(root)
        # Everything else the stack keeps (the sandbox's repositories, the logs, what a stop saves)
        # is the framework's: agents' users pass through the state directory, never into the rest.
        state = self.options.state_dir
        os.chmod(state, 0o711)  # noqa: S103 - passable, not listable: agents reach their own directories
        (state / "saved").mkdir(exist_ok=True)
        for child in state.iterdir():
            if child.is_dir() and child != root:
                os.chmod(child, 0o700)

    def _start_sandbox(self) -> str:
        state = self.options.state_dir
        self.sandbox = GitHubSandbox(
            state / "github",
            app_id=APP_ID,
            app_slug=APP_SLUG,
            installation_id=INSTALLATION_ID,
            webhook_url=f"{self.endpoint}/webhook",
            webhook_secret=WEBHOOK_SECRET,
            examples=first_examples(),
        )
        self.sandbox.node_modules = self.options.root / "node_modules"  # mermaid, for the pages
        if self.github_state.exists():
            self.sandbox.load(self.github_state)
        for name in (self.options.repo, *self.options.extra_repos):
            if name not in self.sandbox.repos:
                self.sandbox.add_repository(name, self._seed_files(name), permissions=HUMANS)
        try:
            return self.sandbox.start(self.options.sandbox_port)
        except OSError:  # taken (another stack, another program): any free port, which the banner says
            if not self.options.sandbox_port:
                raise
            self.sandbox_port_taken = True
            return self.sandbox.start(0)

    def _log_to(self, path: Path) -> None:
        """The Lambdas' JSON logs and the shell's own into one file, not over the terminal."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = path.open("a", encoding="utf-8")
        for handler in logging.getLogger(LAMBDA_SERVICE).handlers:  # Powertools' (JSON) handler
            if isinstance(handler, logging.StreamHandler):
                self._redirected.append((handler, handler.setStream(self._log_file)))
        self._log_handler = logging.StreamHandler(self._log_file)
        self._log_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        package = logging.getLogger("squadron")
        package.addHandler(self._log_handler)
        package.setLevel(logging.INFO)
        package.propagate = False

    def _set_env(self, values: dict[str, str]) -> None:
        for name, value in values.items():
            self._saved_env.setdefault(name, os.environ.get(name))
            os.environ[name] = value

    def _seed_files(self, repo: str) -> dict[str, str]:
        files = {"README.md": f"# {repo}\n\nThe local stack's demo repository.\n"}
        squadron = self.options.root / ".squadron"
        for path in sorted(squadron.rglob("*")):
            if path.is_file() and "schemas" not in path.parts:
                files[str(path.relative_to(self.options.root))] = path.read_text(encoding="utf-8")
        files.update(self.options.files)
        return files

    # --- the loopback endpoint: API Gateway for the ingress, Lambda Invoke for the token vendor --

    def _serve_endpoint(self) -> None:
        stack = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                return

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.path == "/webhook":
                    status, answer, headers = stack._ingress(dict(self.headers), body)
                elif self.path.startswith("/2015-03-31/functions/") and self.path.endswith("/invocations"):
                    name = self.path.split("/")[3]
                    status, answer, headers = stack._invoke(name, body)
                else:
                    status, answer, headers = 404, json.dumps({"message": "Not Found"}).encode(), {}
                self.send_response(status)
                for key, value in {"content-type": "application/json", **headers}.items():
                    self.send_header(key, value)
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.endpoint_server = ThreadingHTTPServer(("127.0.0.1", self.options.port), Handler)
        self.endpoint_server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.endpoint_server.server_address[1]}"
        threading.Thread(target=self.endpoint_server.serve_forever, daemon=True).start()

    def _handler(self, name: str) -> Any:
        return load_handler(self.options.root, name)

    def _ingress(self, headers: dict[str, str], body: bytes) -> tuple[int, bytes, dict[str, str]]:
        response = self._handler("ingress").handler(http_api_event(body, headers), FakeLambdaContext())
        status, answer = int(response["statusCode"]), str(response.get("body") or "")
        if status == 202 and json.loads(answer or "{}").get("status") == "accepted":
            delivery = {key.lower(): value for key, value in headers.items()}.get("x-github-delivery")
            if delivery:
                self.accepted_at.setdefault(delivery, time.monotonic())
        return status, answer.encode(), {}

    def _invoke(self, name: str, body: bytes) -> tuple[int, bytes, dict[str, str]]:
        if name != GATEWAY_FUNCTION:
            return 404, json.dumps({"Message": f"Function not found: {name}"}).encode(), {}
        try:
            answer = self._handler("gateway").handler(json.loads(body or b"{}"), FakeLambdaContext())
        except Exception as exc:  # as Lambda reports an unhandled error
            return 200, json.dumps({"errorMessage": str(exc)}).encode(), {"x-amz-function-error": "Unhandled"}
        return 200, json.dumps(answer).encode(), {}

    # --- workers -------------------------------------------------------------------------------

    def _loop(self, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _route_forever(self) -> None:
        assert self.resources is not None
        poller = QueuePoller(self.resources.endpoint, self.resources.queue_url)
        router = self._handler("router")
        # Agent tasks are local processes: the router's launcher is the local launcher.
        router.runtime().dispatcher.service.launcher = self.launcher
        while not self._stop.is_set():
            if not self.routing.is_set():
                self._poller_paused.set()
                self.routing.wait(0.2)
                continue
            self._poller_paused.clear()
            try:
                messages = poller.receive(wait_seconds=1)
                if not messages:
                    continue
                if self.router_crashes and len(messages) > self.router_crashes[0]:
                    done = self.router_crashes.pop(0)
                    router.handler(
                        sqs_lambda_event(messages[:done], self.resources.queue_arn), FakeLambdaContext()
                    )
                    # The runtime dies before answering: nothing is deleted, and the whole batch
                    # (the records it processed too) is received again after the visibility timeout.
                    self.crashed.append([m["MessageId"] for m in messages])
                    continue
                event = sqs_lambda_event(messages, self.resources.queue_arn)
                # Bounded as the router Lambda is (ROUTER_RUN): past it the run is stopped and
                # nothing deleted, so the batch comes back after its visibility timeout.
                run = invoke(partial(router.handler, event, FakeLambdaContext()), self.options.router_timeout)
                if run.abandoned:  # as Lambda says "Task timed out"
                    self.timed_out.append([m["MessageId"] for m in messages])
                    logger.error("router run timed out after %s s", self.options.router_timeout)
                    continue
                if run.error is not None:
                    raise run.error
                result = run.answer
                assert result is not None
                failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
                poller.delete([m["ReceiptHandle"] for m in messages if m["MessageId"] not in failed])
                self.routed.extend(
                    {
                        "id": m["MessageId"],
                        "failed": m["MessageId"] in failed,
                        "group": m.get("Attributes", {}).get("MessageGroupId"),
                        "delivery": m.get("Attributes", {}).get("MessageDeduplicationId"),
                    }
                    for m in messages
                )
            except Exception as exc:  # the batch comes back after its visibility timeout
                self.errors.append(f"router: {exc}")
                logger.exception("router batch failed")
                time.sleep(1)

    def _publish_forever(self) -> None:
        """The local stand-in for the publisher Lambda on the registry's stream: the same code
        (committed event items -> the local bus, whose rule writes them to a log group)."""
        assert self.resources is not None
        reader = StreamReader(self.resources.stream_arn)
        bus = EventBusPublisher(self.resources.event_bus_name, LOCAL_STAGE)
        while not self._stop.wait(PUBLISH_SECONDS):
            try:
                bus.publish([event for _, event in committed_events(reader.poll())])
            except Exception as exc:  # the stream keeps the records: counted, logged, tried again
                self.errors.append(f"publisher: {exc}")
                logger.exception("publishing domain events failed")

    def _dashboards_forever(self) -> None:
        """Lambda's event source on the dashboards queue: batches to the dashboards handler, what
        it reports failed back to the queue (after its visibility timeout; the DLQ after five)."""
        assert self.resources is not None
        poller = QueuePoller(self.resources.endpoint, self.resources.dashboard_queue_url)
        handler = self._handler("dashboard")
        while not self._stop.is_set():
            try:
                messages = poller.receive(wait_seconds=1)
                if not messages:
                    continue
                result = handler.handler(
                    sqs_lambda_event(messages, self.resources.dashboard_queue_arn), FakeLambdaContext()
                )
                failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
                poller.delete([m["ReceiptHandle"] for m in messages if m["MessageId"] not in failed])
            except Exception as exc:  # the batch comes back after its visibility timeout
                self.errors.append(f"dashboards: {exc}")
                logger.exception("dashboards batch failed")
                time.sleep(1)

    def _ci_forever(self) -> None:
        """The showcase's stand-in CI, looking for open pull requests' new heads."""
        assert self.sandbox is not None
        ci = StandInCI(self.sandbox, (self.options.repo, *self.options.extra_repos))
        while not self._stop.wait(0.5):
            try:
                ci.run_once()
            except Exception as exc:  # the sandbox refused or hung: the next pass tries again
                self.errors.append(f"stand-in CI: {exc}")
                logger.exception("the stand-in CI failed")

    def pause_routing(self, timeout: float = 30.0) -> None:
        """Stop routing once the batch in hand is done: events wait in events.fifo."""
        self.routing.clear()
        if not self._poller_paused.wait(timeout):
            raise TimeoutError("the router's poller did not pause")

    def resume_routing(self) -> None:
        self.routing.set()

    def _reconcile_forever(self) -> None:
        if self.restored is not None:
            # Agents that ran when the stack stopped have no process now: relaunch them at once.
            self.reconcile()
        while not self._stop.wait(self.options.reconcile_seconds):
            self.reconcile()

    def fire_schedule(self, repo_id: int, at: datetime) -> str | None:
        """What EventBridge Scheduler does when repository ``repo_id``'s retrospective schedule
        fires at ``at`` (the reconciler created it; moto never fires it): its message id."""
        assert self.resources is not None
        return fire_schedule(
            self.resources.endpoint, self.resources.schedule_group, schedule_name(repo_id), at
        )

    def reconcile(self) -> dict[str, Any]:
        try:
            summary: dict[str, Any] = self._handler("reconciler").handler({}, FakeLambdaContext())
        except Exception as exc:
            self.errors.append(f"reconciler: {exc}")
            logger.exception("reconciler run failed")
            return {}
        return summary

    # --- stop ----------------------------------------------------------------------------------

    def stop(self) -> None:
        if self._stop.is_set():
            return  # stopped already: its state is saved, its servers gone
        self._stop.set()
        if self._lock is None:
            return  # refused (another stack holds the state) or never started: nothing here is ours
        (self.options.state_dir / ENDPOINTS_FILE).unlink(missing_ok=True)
        for thread in self._threads:
            thread.join(timeout=10)
        if self.launcher is not None:
            self.launcher.shutdown()
        elif self._zygote is not None:  # the start failed before the launcher existed
            self._zygote.stop()
        if self.sandbox is not None:
            self.sandbox.stop()  # its last webhooks go through the ingress into events.fifo first
            self.sandbox.save(self.github_state)
        if self.resources is not None and self.moto is not None:
            try:
                save_state(self.resources, self.aws_state)
            except Exception:  # a stack that failed to start has nothing worth keeping
                logger.exception("saving the AWS state failed")
        self.model.stop()
        if self.endpoint_server is not None:
            self.endpoint_server.shutdown()
            self.endpoint_server.server_close()
        if self.moto is not None:
            self.moto.stop()
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if self._log_handler is not None:
            package = logging.getLogger("squadron")
            package.removeHandler(self._log_handler)
            package.propagate = True
        for handler, stream in self._redirected:
            handler.setStream(stream)
        self._redirected.clear()
        if self._log_file is not None:
            self._log_file.close()
        for name in ("ingress", "router", "gateway", "reconciler", "dashboard"):
            sys.modules.pop(f"{name}_handler", None)  # wired to this stack: the next one loads its own
        self._lock.release()  # last: the state is saved, another stack may take it
