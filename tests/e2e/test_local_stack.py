"""The local stack end to end: a human opens an issue in the GitHub sandbox; the webhook goes
through the ingress handler, events.fifo (moto), the router handler; the PM agent runs as a local
process through the real Copilot CLI against the local model, reads the event and goes idle."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from squadron.adapters.confinement import AgentDirs
from squadron.adapters.dynamo_registry import DynamoRegistry
from squadron.cli import main
from squadron.domain.agents import AgentRecord, AgentStatus
from squadron.local.credentials import load_credentials
from squadron.local.sandbox import GitHubSandbox
from squadron.local.stack import LocalStack
from squadron.local.wiring import LocalOptions
from tests.e2e.conftest import ROOT, Human, StackFactory, agent, eventually
from tests.support.github_fake import app_private_key

pytestmark = pytest.mark.e2e


def test_an_issue_reaches_the_pm_which_runs_as_a_local_process(stack: LocalStack) -> None:
    assert stack.sandbox is not None and stack.resources is not None
    opened = httpx.post(
        f"{stack.sandbox.base_url}/repos/octo/demo/issues",
        json={"title": "Export API", "body": "CSV export, please."},
        headers={"authorization": "token human:octo-human"},
    )
    assert opened.status_code == 201, opened.text
    registry = DynamoRegistry(stack.resources.table_name)

    def pm() -> AgentRecord | None:
        return registry.get_agent("1-pm")

    eventually(pm, "the router to create the PM")
    eventually(lambda: stack.launcher is not None and stack.launcher.exits, "the PM process to finish")
    agent = pm()
    assert agent is not None
    assert (agent.status, agent.task_arn) == (AgentStatus.ACTIVE, None), stack.errors  # idle
    assert registry.pending_inbox("1-pm") == []  # it read the issue_opened item
    assert stack.launcher is not None and list(stack.launcher.exits.values()) == [0]
    asked = stack.model.requests
    assert any(
        "Export API" in str(m.get("content")) for r in asked for m in r["messages"] if m.get("role") == "tool"
    )
    assert stack.errors == []
    # The operator's view of the running stack.
    out = io.StringIO()
    assert main(["status", "--local", "--state", str(stack.options.state_dir)], out=out) == 0
    assert "1-pm" in out.getvalue() and "ACTIVE (idle)" in out.getvalue(), out.getvalue()
    out = io.StringIO()
    assert main(["agent", "show", "1-pm", "--local", "--state", str(stack.options.state_dir)], out=out) == 0
    assert "inbox (0 waiting)" in out.getvalue()
    opened_guid = stack.sandbox.deliveries[0].guid
    out = io.StringIO()
    assert main(["replay", opened_guid, "--local", "--state", str(stack.options.state_dir)], out=out) == 0
    assert f"GitHub redelivers {opened_guid} (issues.opened" in out.getvalue(), out.getvalue()
    assert [d.redelivery for d in stack.sandbox.deliveries if d.guid == opened_guid] == [False, True]


def test_squadron_local_runs_until_interrupted_and_leaves_nothing_behind(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "squadron.cli", "local", "--state", str(tmp_path / "state")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    lines: list[str] = []
    for line in process.stdout:
        lines.append(line)
        if line.startswith("  GitHub sandbox"):
            sandbox = line.split()[2]
            break
    opened = httpx.post(
        f"{sandbox}/repos/octo/demo/issues",
        json={"title": "Hello", "body": "from the e2e test"},
        headers={"authorization": "token human:octo-human"},
    )
    assert opened.status_code == 201
    for line in process.stdout:  # the feed says what happens as it happens
        lines.append(line)
        if "agent pm: CREATED -> ACTIVE" in line:
            break
    log = tmp_path / "state" / "logs" / "1-pm.log"
    eventually(lambda: log.exists() and "starting Copilot CLI" in log.read_text(), "the PM to start its CLI")
    process.send_signal(signal.SIGINT)  # while the PM's task runs (it lingers for more news)
    rest, _ = process.communicate(timeout=60)
    assert process.returncode == 0, "".join(lines) + rest
    assert "stopped; no agent process left running" in rest
    # What happened is printed as it happens; the Lambdas' JSON logs went to their file.
    said = "".join(lines) + rest
    assert "github: issues.opened #1 by octo-human" in said and "agent pm: CREATED -> ACTIVE" in said
    assert '"level"' not in rest
    assert '"message":"webhook accepted"' in (tmp_path / "state" / "logs" / "lambdas.log").read_text()
    leftovers = subprocess.run(
        ["pgrep", "-f", str(tmp_path)], capture_output=True, text=True, check=False
    ).stdout.split()
    assert leftovers == []


def test_the_demo_scenario_completes_through_every_part_of_the_system_every_time(tmp_path: Path) -> None:
    """Played twice in one directory, as a user trying it again would: each run starts from
    nothing in the demo's own directory, and the stack's own state beside it is left alone."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    own = tmp_path / "state" / "saved" / "mine.json"
    own.parent.mkdir(parents=True)
    own.write_text("{}")
    for run in ("first", "second"):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "squadron.cli",
                "local",
                "--demo",
                "--exit",
                "--state",
                str(tmp_path / "state"),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, run + ": " + done.stdout[-4000:] + done.stderr[-4000:]
        said = done.stdout
        for step in (
            "octo-human opened #1",
            "the PM triaged #1",
            "feat-dev-1 filed #2",
            "feat-dev-1 woke with its earlier conversation and opened PR #3",
            "pr-review read the diff, reviewed it and posted squadron/pr-review = success",
            "the reconciler's sweep opened dashboard issue #4",
            "squadron merged PR #3",
            "demo: the scenario completed",
            f"stopped; no agent process left running; state saved in {tmp_path / 'state' / 'demo'}",
        ):
            assert step in said, f"{run}: {said}"
        assert "agent feat-dev-1: ACTIVE -> SLEEPING (blocked by #2)" in said, run
        assert "Resumed from" not in said, run
    assert own.read_text() == "{}"


def test_with_app_credentials_the_stack_talks_to_that_github_not_its_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real-GitHub mode, with a separate sandbox as "GitHub": reached only by its URL, App id,
    key and webhook secret, as github.com would be; its webhooks come in once pointed at the
    stack's endpoint (what a tunnel does)."""
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    github = GitHubSandbox(
        tmp_path / "github.com", app_id=31337, app_slug="acme-squadron", webhook_secret="tunnel-secret"
    )
    seeds = {
        str(p.relative_to(ROOT)): p.read_text()
        for p in (ROOT / ".squadron").rglob("*.*")
        if "schemas" not in p.parts
    }
    github.add_repository(
        "acme/shop", {"README.md": "# shop\n", **seeds}, permissions={"octo-human": "admin"}
    )
    github.start()
    key = tmp_path / "app.pem"
    key.write_text(app_private_key()[0])
    credentials = load_credentials(
        {
            "SQUADRON_GITHUB_APP_ID": "31337",
            "SQUADRON_GITHUB_PRIVATE_KEY_FILE": str(key),
            "SQUADRON_GITHUB_WEBHOOK_SECRET": "tunnel-secret",
            "SQUADRON_GITHUB_API_URL": github.base_url,
            "SQUADRON_GIT_REMOTE_TEMPLATE": str(tmp_path / "github.com" / "git" / "{repo}.git"),
        }
    )
    stack = LocalStack(
        LocalOptions(
            root=ROOT,
            state_dir=tmp_path / "state",
            github=credentials,
            reconcile_seconds=3600,
            pm_linger_seconds=1,
        )
    )
    try:
        stack.start()
        assert stack.sandbox is None and stack.app_slug == "acme-squadron"  # asked GitHub with the App's JWT
        github.webhook_url = f"{stack.endpoint}/webhook"  # the tunnel
        opened = httpx.post(
            f"{github.base_url}/repos/acme/shop/issues",
            json={"title": "Checkout is slow", "body": "p99 is 3 s"},
            headers={"authorization": "token human:octo-human"},
        )
        assert opened.status_code == 201
        assert stack.resources is not None
        registry = DynamoRegistry(stack.resources.table_name)
        eventually(lambda: stack.launcher is not None and stack.launcher.exits, "the PM to run")
        pm = registry.get_agent("1-pm")
        assert pm is not None and pm.repo_full_name == "acme/shop"
        assert any("Checkout is slow" in str(r["messages"]) for r in stack.model.requests)
        assert stack.launcher is not None and list(stack.launcher.exits.values()) == [0]
        # Its own comments and labels come back as webhooks the ingress recognises as its own.
        assert all(d.status_code == 202 for d in github.deliveries)
    finally:
        stack.stop()
        github.stop()


def test_a_finished_agents_working_copy_and_session_leave_with_the_next_task(
    local_stack: StackFactory,
) -> None:
    stack = local_stack(state_retention_days=0)  # due as soon as no task of it runs
    human = Human(stack)
    number = human.open_issue("Export API", assign=True)
    dev = f"1-{number}-feat-dev"

    def ended(agent_id: str) -> AgentRecord | None:
        """The agent once its task reported its end and its process exited."""
        record = agent(stack, agent_id)
        assert stack.launcher is not None
        if (
            record is None
            or record.status is AgentStatus.CREATED  # its first task has not begun yet
            or record.pending_launch is not None  # a task decided, not yet armed or started
            or record.launch_secret_hash is not None
            or record.task_arn is not None
        ):
            return None
        return record if agent_id not in stack.launcher.running_agents() else None

    eventually(lambda: ended(dev), "the dev agent's task to end")
    dirs = AgentDirs(stack.repo_root(1), dev)
    assert dirs.work.is_dir() and dirs.copilot_home.is_dir() and dirs.framework_clone.is_dir()
    human.close(number)
    eventually(
        lambda: (a := agent(stack, dev)) is not None and a.status is AgentStatus.COMPLETED, "it to complete"
    )
    eventually(lambda: ended("1-pm"), "the PM's task to end")
    human.open_issue("Import API")  # the PM's next task sweeps before its session
    purged = eventually(
        lambda: (a := agent(stack, dev)) is not None and a.purged_at is not None and a, "the purge"
    )
    assert purged.status is AgentStatus.COMPLETED
    assert not dirs.agent.exists() and not dirs.framework_clone.exists()
    eventually(lambda: ended("1-pm"), "the PM's task to end")
    trash = stack.repo_root(1) / "trash"
    assert not trash.exists() or list(trash.iterdir()) == []  # emptied before that task ended
    assert AgentDirs(stack.repo_root(1), "1-pm").agent.is_dir()  # the working agents' state stays
    assert stack.errors == []
