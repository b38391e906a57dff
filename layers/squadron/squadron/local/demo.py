"""`squadron local --demo`: one issue's whole life, played against the GitHub sandbox.

A human opens an issue; the PM agent labels it and assigns it to a feature
developer; the dev agent finds it needs another change first, files that as
a blocker issue and sleeps; a human fixes and closes the blocker; the dev
agent wakes with its earlier conversation, writes the code in its working
copy, opens a pull request; the review agent reads the diff, approves and
posts its status; CI passes; the approval flow is met, the merge gate merges
and the issue closes. Every agent runs through the real Copilot CLI and the
real framework tools; only the model's answers are scripted
(:func:`demo_policy`), keyed on the role in the system prompt and on what the
conversation already holds.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from squadron.local.feed import Feed, stack_feed
from squadron.local.model import Json, Turn, calls_since_prompt, offered

#: The demo repository's approval flow: an agent review and CI, then the gate merges.
DEMO_FLOWS = """\
version: 1
default:
  required_reviews:
    - role: agent:pr-review
  required_status_checks: [ci]
  merge_policy: {method: squash, auto_merge: true, require_ci_pass: true, delete_branch: true}
"""
HUMAN = "octo-human"
ISSUE_TITLE = "Export the registry as CSV"
BLOCKER_TITLE = "Add a registry listing API"


def prompt_role(request: Json) -> str:
    """The role whose definition the system prompt ends with (the CLI's own prompt comes first)."""
    system = "\n".join(
        message_text(m.get("content"))
        for m in request.get("messages", [])
        if m.get("role") in ("system", "developer")
    )
    found = re.findall(r"# Agent: ([a-z0-9-]+)", system)
    return found[-1] if found else ""


def message_text(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def _tool_results(request: Json) -> str:
    return "\n".join(
        message_text(m.get("content")) for m in request.get("messages", []) if m.get("role") == "tool"
    )


def last_prompt(request: Json) -> str:
    users = [message_text(m.get("content")) for m in request.get("messages", []) if m.get("role") == "user"]
    return users[-1] if users else ""


def demo_policy(request: Json) -> Turn | None:
    """The demo's model: what each role does next, from the conversation so far."""
    role, done, tools = prompt_role(request), calls_since_prompt(request), offered(request)
    if "circuit breaker" in last_prompt(request):
        return "Summary: stopped by a circuit breaker."
    if role == "pm":
        return _pm(request, done)
    if role == "feat-dev":
        return _dev(request, done)
    if role in ("pr-review", "security-review"):
        steps: list[Turn] = [
            ("check_for_events", {}),  # a pipeline stage's instruction waits there
            ("read_pull_request", {}),
            ("submit_review", {"event": "APPROVE", "body": "Read the diff: the export is small and tested."}),
            ("post_status", {"state": "success", "description": "approved"}),
            ("report_complete", {"summary": "Approved."}),
        ]
        return _next(steps, done, tools)
    return None


def _next(steps: list[Turn], done: list[str], tools: set[str]) -> Turn:
    for step in steps[len(done) :]:
        if isinstance(step, str) or step[0] in tools or step[0] in ("bash", "create", "view"):
            return step
    return "Done."


def _pm(request: Json, done: list[str]) -> Turn:
    if not done:
        return ("check_for_events", {})
    events = _tool_results(request)
    # "#N opened by LOGIN" (the issue's title follows on the next line, judged by its author's trust).
    opened = re.findall(r"#(\d+) opened by ([\w\[\]-]+)", events)
    human = [int(n) for n, who in opened if who == HUMAN]
    filed = [int(n) for n, who in opened if who != HUMAN]
    plan: list[Turn] = [("check_for_events", {})]
    for number in human:
        plan += [
            ("label_issue", {"number": number, "labels": ["feature"]}),
            ("assign_issue", {"number": number, "role": "feat-dev"}),
            ("comment", {"number": number, "body": "Triage: a feature; feat-dev takes it."}),
        ]
    for number in filed:
        plan.append(
            ("comment", {"number": number, "body": "A blocker filed by an agent: a human takes this one."})
        )
    plan.append(("report_complete", {"summary": "Triaged the new issues."}))
    return plan[len(done)] if len(done) < len(plan) else "Triage done."


def _dev(request: Json, done: list[str]) -> Turn:
    woken = "woken because" in last_prompt(request)
    if not woken:
        plan: list[Turn] = [
            ("check_for_events", {}),
            (
                "create_blocker_issue",
                {
                    "title": BLOCKER_TITLE,
                    "body": "The CSV export needs an API that lists the registry's agents.",
                    "reason": "the export reads its rows from that API",
                },
            ),
            "Blocked on the listing API; sleeping until it is closed.",
        ]
    else:
        plan = [
            ("check_for_events", {}),
            (
                "bash",
                {
                    "command": 'printf \'def export(rows):\\n    return "\\\\n".join(",".join(r) for r in rows)\\n\' > export.py',
                    "description": "write the export",
                },
            ),
            ("open_pr", {"title": ISSUE_TITLE, "body": "Closes #1. Adds export.py; tested by hand."}),
            ("report_complete", {"summary": "Opened the pull request for the CSV export."}),
            "PR open.",
        ]
    return plan[len(done)] if len(done) < len(plan) else "Done."


@dataclass
class Timeline:
    out: TextIO
    started: float = field(default_factory=time.monotonic)
    lines: list[str] = field(default_factory=list)

    def say(self, text: str) -> None:
        line = f"[{time.monotonic() - self.started:6.1f}s] {text}"
        self.lines.append(line)
        self.out.write(line + "\n")
        self.out.flush()


class DemoStuck(Exception):
    """The scenario did not reach a step in time; the message names it."""


#: The demo's own state directory, under the local stack's (``.squadron-local/demo``).
DEMO_STATE = "demo"


class DemoRunningError(Exception):
    """Another demo still runs with the state directory a new one would start from."""


def fresh_state(state_dir: Path, *, running: Callable[[Path], bool]) -> Path:
    """The demo's state directory under ``state_dir``, emptied: every demo starts from nothing
    (it would otherwise resume the previous run's issues and agents), and the local stack's
    own state beside it is never touched. ``running(dir)`` tells whether a stack still uses one."""
    demo = state_dir / DEMO_STATE
    if demo.exists() and running(demo):
        raise DemoRunningError(f"a demo is still running with state in {demo}: stop it first (Ctrl-C)")
    shutil.rmtree(demo, ignore_errors=True)
    demo.mkdir(parents=True)
    return demo


def sandbox_call(base: str, repo: str, method: str, path: str, who: str, **body: Any) -> Any:
    """``method`` on ``/repos/<repo><path>`` of the GitHub sandbox at ``base`` as the person
    ``who``, with ``body`` as JSON; the JSON answer (None when empty), or DemoStuck naming the
    call and the sandbox's refusal."""
    request = urllib.request.Request(  # noqa: S310 (the sandbox on loopback)
        f"{base}/repos/{repo}{path}",
        data=json.dumps(body).encode() if body else None,
        method=method,
        headers={"authorization": f"token human:{who}", "content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
            content = answer.read()
    except urllib.error.HTTPError as exc:
        raise DemoStuck(f"{method} {repo}{path} as {who}: {exc.code} {exc.read().decode()}") from exc
    return json.loads(content) if content else None


def play(stack: Any, out: TextIO, *, step_timeout: float = 180.0, feed: Feed | None = None) -> Timeline:
    """Run the scenario on a started :class:`~squadron.local.stack.LocalStack`; raise DemoStuck."""
    timeline = Timeline(out)
    base = stack.sandbox.base_url
    repo = stack.options.repo

    def api(method: str, path: str, who: str, **body: Any) -> Any:
        return sandbox_call(base, repo, method, path, who, **body)

    feed = feed or stack_feed(stack)

    def wait(what: str, check: Callable[[], Any]) -> Any:
        deadline = time.monotonic() + step_timeout
        while time.monotonic() < deadline:
            for line in feed.poll():
                timeline.say(f"  {line}")
            value = check()
            if value:
                return value
            if stack.errors:
                raise DemoStuck(f"{what}: the stack failed: {stack.errors[-1]}")
            time.sleep(0.25)
        raise DemoStuck(f"stuck waiting for: {what}")

    issue = api(
        "POST", "/issues", HUMAN, title=ISSUE_TITLE, body="Operators want the registry as a CSV file."
    )
    number = int(issue["number"])
    # The issue this run opened, and its agent: never one a previous run left behind.
    dev = f"{api('GET', '', HUMAN)['id']}-{number}-feat-dev"
    bot = stack.sandbox.bot_login
    timeline.say(f"{HUMAN} opened #{number}: {ISSUE_TITLE}")
    wait(
        "the PM to assign the issue",
        lambda: any(a["login"] == bot for a in api("GET", f"/issues/{number}", HUMAN)["assignees"]),
    )
    timeline.say(f"the PM triaged #{number} (label feature) and assigned it to feat-dev")
    blocker = wait(
        "the dev agent to file a blocker",
        lambda: next(
            (
                i
                for n, i in stack.sandbox.repos[repo].issues.items()
                if n > number and i["title"] == BLOCKER_TITLE
            ),
            None,
        ),
    )
    wait("the dev agent to sleep", lambda: _agent_status(stack, dev) == "SLEEPING")
    timeline.say(f"feat-dev-{number} filed #{blocker['number']} ({BLOCKER_TITLE}) and sleeps on it")
    api("PATCH", f"/issues/{blocker['number']}", HUMAN, state="closed")
    timeline.say(f"{HUMAN} fixed and closed #{blocker['number']}")
    pr = wait(
        "the woken dev agent to open a pull request",
        lambda: next((p for n, p in stack.sandbox.repos[repo].pulls.items() if n > number), None),
    )
    timeline.say(f"feat-dev-{number} woke with its earlier conversation and opened PR #{pr['number']}")
    wait(
        "the review agent's status",
        lambda: any(
            s["context"] == "squadron/pr-review"
            for s in stack.sandbox.repos[repo].statuses.get(pr["head"]["sha"], [])
        ),
    )
    timeline.say("pr-review read the diff, reviewed it and posted squadron/pr-review = success")
    stack.reconcile()
    board = wait(
        "the dashboard issue",
        lambda: next(
            (
                i
                for i in stack.sandbox.repos[repo].issues.values()
                if any(label.get("name") == "squadron-dashboard" for label in i.get("labels", []))
            ),
            None,
        ),
    )
    timeline.say(
        f"the reconciler's sweep opened dashboard issue #{board['number']}, kept up to date from the "
        f"domain events: the agents, PR #{pr['number']} and what the merge gate waits for, the cost "
        "so far, boxes to act"
    )
    api(
        "POST",
        "/check-runs",
        "ci-bot",
        name="ci",
        head_sha=pr["head"]["sha"],
        status="completed",
        conclusion="success",
    )
    timeline.say("CI passed")
    wait("the merge gate to merge", lambda: stack.sandbox.repos[repo].pulls[pr["number"]]["merged"])
    timeline.say(f"the approval flow is met: squadron merged PR #{pr['number']}")
    wait(f"issue #{number} to close", lambda: stack.sandbox.repos[repo].issues[number]["state"] == "closed")
    wait("the dev agent to complete", lambda: _agent_status(stack, dev) == "COMPLETED")
    timeline.say(f"#{number} is closed and feat-dev-{number} completed: the scenario is complete")
    return timeline


def _agent_status(stack: Any, agent_id: str) -> str | None:
    from squadron.adapters.registry.agents import DynamoAgentRecords  # noqa: PLC0415

    agent = DynamoAgentRecords(stack.resources.table_name).get_agent(agent_id)
    return str(agent.status) if agent is not None else None
