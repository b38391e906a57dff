"""The showcase: what `squadron local` shows when no model is configured — agents visibly at work.

The local stack's scripted model answers every agent (through the real Copilot CLI and the real
framework tools) with a plausible script, for any issue a person opens in the GitHub sandbox:

- the PM reads the new issue, labels it with the label that routes to the repository's default
  dev role (from ``.squadron/config.yaml``), assigns that role (the App is assigned) and says so
  in a comment;
- the dev agent writes a small real change in its working copy — ``docs/notes/<issue>.md``, a
  note naming the issue — and opens a pull request that closes the issue;
- the review agent reads the pull request, approves it and posts its ``squadron/<role>`` status;
- a stand-in CI (:class:`StandInCI`) passes the check ``ci`` on every open pull request's head;
- the approval flow (:data:`SHOWCASE_FLOWS`) is met: the merge gate merges, the issue closes.

Every answer is chosen from what the CLI sends — the role in the system prompt, the tools on
offer, the tools called since the last prompt, and the events the agent read — never from a
clock. Nothing an issue's author wrote steers it: the PM acts on the events' framework-written
lines only (an untrusted text is withheld or fenced line by line, so it cannot forge one), the
label and the role come from the configuration, and the dev agent's note carries the issue's
title (which its prompt holds only when a writer wrote or vouched for it) as inert data,
fenced in the file and never part of a shell command.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from squadron.config.loader import load_directory
from squadron.config.parse import SquadronConfig
from squadron.domain.repo_config.constants import CONFIG_DIR
from squadron.local.demo import DEMO_FLOWS, last_prompt, message_text, prompt_role
from squadron.local.model import Json, Turn, calls_since_prompt, offered

#: The showcase repository's approval flow: the review agent and CI, then the gate merges.
SHOWCASE_FLOWS = DEMO_FLOWS
#: The check the stand-in CI posts, the one the approval flow requires.
CI_CHECK = "ci"
#: Who the stand-in CI acts as in the sandbox.
CI_LOGIN = "ci-bot"
#: Where the dev agent's note goes (``<issue number>.md``).
NOTES_DIR = "docs/notes"

#: An issue the PM was told of: a line the framework wrote ("- [issue_opened] #7 opened by alice"),
#: at the start of a line (an untrusted text is withheld, or fenced with every line prefixed).
_OPENED = re.compile(r"^- \[issue_(?:re)?opened\] #(\d+) (?:re)?opened by (\S+)$", re.MULTILINE)
#: The dev agent's first prompt: its issue, and the issue's title only when it is a trusted one.
_START = re.compile(r'Start on issue #(\d+)(?:: "(.*)")?\. Call check_for_events', re.DOTALL)


@dataclass(frozen=True)
class Showcase:
    """The showcase's model policy for one repository's configuration (a :data:`~.model.Policy`)."""

    #: The label the PM applies (the first one routing to ``dev_role``; "" if none does).
    label: str
    #: The dev role the PM assigns: the configuration's default dev role.
    dev_role: str
    dev_roles: frozenset[str]
    review_roles: frozenset[str]
    pm_roles: frozenset[str]
    #: The label with which a writer approves a stranger's issue (whose assignment waits for it).
    approval_label: str = "squadron:approved"

    @classmethod
    def of_checkout(cls, root: Path) -> Showcase:
        """For the repository seeded from the checkout at ``root`` (its ``.squadron``)."""
        return cls.from_config(load_directory(root / CONFIG_DIR))

    @classmethod
    def from_config(cls, config: SquadronConfig) -> Showcase:
        repo = config.config
        dev_role = repo.default_dev_role
        # The system prompt names the role's agent definition (``# Agent: <name>``).
        roles = [config.role(name) for name in repo.roles]
        kinds = {role.agent.name: role.kind for role in roles}
        return cls(
            label=next((name for name, label in repo.labels.items() if label.role == dev_role), ""),
            dev_role=dev_role,
            # The dev roles that change code (a shell, a pull request): not the retrospective's.
            dev_roles=frozenset(
                role.agent.name
                for role in roles
                if role.kind == "dev" and "bash" in role.agent.host_tools and "open_pr" in role.agent.tools
            ),
            review_roles=frozenset(n for n, k in kinds.items() if k == "review"),
            pm_roles=frozenset(n for n, k in kinds.items() if k == "pm"),
            approval_label=repo.triage.approval_label,
        )

    def __call__(self, request: Json) -> Turn | None:
        role = prompt_role(request)
        if "circuit breaker" in last_prompt(request):
            return "Summary: stopped by a circuit breaker."
        if role in self.pm_roles:
            return self.pm(request)
        if role in self.dev_roles:
            return self.dev(request, role)
        if role in self.review_roles:
            return self.review(request, role)
        return None  # another role (the retrospective): the quiet default

    # --- the roles ---------------------------------------------------------------------------

    def pm(self, request: Json) -> Turn:
        done = calls_since_prompt(request)
        plan: list[Turn] = [("check_for_events", {})]
        if done:
            for number in triaged_issues(_results_of(request, "check_for_events")):
                plan.append(("read_issue", {"number": number}))
                if self.label:
                    plan.append(("label_issue", {"number": number, "labels": [self.label]}))
                plan += [
                    ("assign_issue", {"number": number, "role": self.dev_role}),
                    ("comment", {"number": number, "body": self.triage_comment()}),
                ]
            plan.append(("report_complete", {"summary": "Triaged the new issues (showcase model)."}))
        return _step(plan, done, offered(request), "Triage done.")

    def triage_comment(self) -> str:
        labelled = f"labelled it `{self.label}` and " if self.label else ""
        return (
            f"Triage by the local stack's showcase model: {labelled}assigned it to `{self.dev_role}`, "
            "which opens a pull request for it. (With a real model configured, the PM reads the issue "
            "and decides.)"
        )

    def dev(self, request: Json, role: str) -> Turn:
        done, tools = calls_since_prompt(request), offered(request)
        start = _START.search("\n".join(_prompts(request)))
        if start is None or "open_pr" in _called_before_prompt(request):
            plan: list[Turn] = [
                ("check_for_events", {}),
                ("report_complete", {"summary": "Nothing more to do here (showcase model)."}),
            ]
            return _step(plan, done, tools, "Done.")
        number, title = int(start.group(1)), start.group(2) or ""
        plan = [
            ("check_for_events", {}),
            (
                "bash",
                {"command": note_command(number, title, role), "description": f"write {note_path(number)}"},
            ),
            (
                "open_pr",
                {
                    "title": f"Add a note on issue #{number}",
                    "body": (
                        f"Closes #{number}.\n\nAdds `{note_path(number)}`, a note on the issue, written by "
                        "the local stack's showcase model (a real model would implement the issue here)."
                    ),
                },
            ),
            ("report_complete", {"summary": f"Opened a pull request for #{number} (showcase model)."}),
        ]
        return _step(plan, done, tools, "Pull request open.")

    def review(self, request: Json, role: str) -> Turn:
        done, tools = calls_since_prompt(request), offered(request)
        if "submit_review" in _called_before_prompt(request):
            plan: list[Turn] = [
                ("check_for_events", {}),
                ("report_complete", {"summary": "Reviewed already (showcase model)."}),
            ]
            return _step(plan, done, tools, "Done.")
        plan = [
            ("read_pull_request", {}),
            (
                "submit_review",
                {
                    "event": "APPROVE",
                    "body": f"{role} (showcase model): read the diff; a note under `{NOTES_DIR}/`, "
                    "nothing else changed.",
                },
            ),
            ("post_status", {"state": "success", "description": "approved (showcase model)"}),
            ("report_complete", {"summary": "Approved (showcase model)."}),
        ]
        return _step(plan, done, tools, "Approved.")


def triaged_issues(events: str) -> list[int]:
    """The issues the events say a person opened or reopened, in order, once each (an agent's or
    the App's issues are left to the humans and agents that filed them)."""
    numbers: list[int] = []
    for number, login in _OPENED.findall(events):
        if not login.endswith("[bot]") and int(number) not in numbers:
            numbers.append(int(number))
    return numbers


def note_path(number: int) -> str:
    return f"{NOTES_DIR}/{number}.md"


def note(number: int, title: str, role: str) -> str:
    """The dev agent's note on issue ``number``: its title as inert data in a fence it cannot close."""
    flat = " ".join(title.split())[:256]
    if not flat:
        shown = "(its title is not shown: only a title a person with write access wrote or vouched for is)"
    else:
        longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
        fence = "`" * max(3, longest + 1)
        shown = f"{fence}text\n{flat}\n{fence}"
    return (
        f"# Issue #{number}\n\n"
        f"A note by the `{role}` agent of the local stack's showcase model. The issue's title:\n\n"
        f"{shown}\n\n"
        "The PM triaged the issue and assigned it; this agent wrote this note and opened a pull request "
        "closing the issue; the review agent reviews it, CI passes and the merge gate merges it. With a "
        "real model configured, the agent implements the issue instead.\n"
    )


def note_command(number: int, title: str, role: str) -> str:
    """The shell command writing :func:`note` into the working copy: the text travels base64-encoded
    (an alphabet the shell gives no meaning to), so no title can become part of the command."""
    encoded = base64.b64encode(note(number, title, role).encode()).decode()
    return f"mkdir -p {NOTES_DIR} && printf %s '{encoded}' | base64 -d > {note_path(number)}"


def _step(plan: list[Turn], done: list[str], tools: set[str], finally_: str) -> Turn:
    for step in plan[len(done) :]:
        if isinstance(step, str) or step[0] in tools:
            return step
    return finally_


def _prompts(request: Json) -> list[str]:
    return [message_text(m.get("content")) for m in request.get("messages", []) if m.get("role") == "user"]


def _results_of(request: Json, tool: str) -> str:
    """What the calls of ``tool`` answered (not the other tools': an issue read shows its text)."""
    messages = request.get("messages", [])
    ids = {
        call.get("id")
        for m in messages
        for call in m.get("tool_calls") or []
        if call.get("function", {}).get("name") == tool
    }
    return "\n".join(
        message_text(m.get("content"))
        for m in messages
        if m.get("role") == "tool" and m.get("tool_call_id") in ids
    )


def _called_before_prompt(request: Json) -> list[str]:
    """The tools the model called before the last prompt (in an earlier turn or task)."""
    messages = request.get("messages", [])
    last = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=0)
    return [
        str(call.get("function", {}).get("name"))
        for m in messages[:last]
        for call in m.get("tool_calls") or []
    ]


class StandInCI:
    """CI for the showcase: the check ``ci`` passed on every open pull request's head commit that
    has none yet, posted through the sandbox's REST API as :data:`CI_LOGIN` (so that its
    ``check_run`` webhook reaches the merge gate as a CI service's would). It runs no tests, and
    its check run says so."""

    def __init__(self, sandbox: Any, repos: Iterable[str]) -> None:
        self.sandbox = sandbox
        self.repos = tuple(repos)

    def pending(self) -> list[tuple[str, str]]:
        """(repository, head sha) of every open pull request whose head has no ``ci`` check run."""
        waiting: list[tuple[str, str]] = []
        for name in self.repos:
            repo = self.sandbox.repos.get(name)
            if repo is None:
                continue
            for pull in list(repo.pulls.values()):
                sha = str(pull["head"]["sha"])
                runs = list(repo.check_runs.get(sha, []))
                if pull["state"] == "open" and not any(r["name"] == CI_CHECK for r in runs):
                    waiting.append((name, sha))
        return waiting

    def run_once(self) -> list[tuple[str, str]]:
        """Pass CI on every pending head; what it passed."""
        passed = self.pending()
        for name, sha in passed:
            self._post(name, sha)
        return passed

    def _post(self, repo: str, sha: str) -> None:
        body = {
            "name": CI_CHECK,
            "head_sha": sha,
            "status": "completed",
            "conclusion": "success",
            "output": {
                "title": "stand-in CI: passed",
                "summary": "The local stack's showcase CI passes every pull request; it runs no tests.",
            },
        }
        request = urllib.request.Request(  # noqa: S310 (the sandbox on loopback)
            f"{self.sandbox.base_url}/repos/{repo}/check-runs",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"authorization": f"token human:{CI_LOGIN}", "content-type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30):  # noqa: S310
            pass
