"""The dashboard issue of a repository: what its agents are doing, at a glance (pure rendering).

One issue per repository, found again by its hidden marker (as Renovate finds its Dependency
Dashboard): agents by status with links, the blocker graph as a Mermaid flowchart, each open
agent pull request with what the merge gate waits for, the escalations waiting for a human,
what each issue has cost so far, and what the repository's memory holds (proposals a person
may confirm with a tick). The dashboards service (:mod:`squadron.shell.dashboards`) renders it
from the registry when the repository's domain events ask, at most once a minute
(:mod:`squadron.domain.dashboard_refresh`), and edits the issue only when the body changed
(:func:`body_digest` in the marker says which body is there).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from squadron.domain.agents import TERMINAL, AgentRecord, AgentStatus, RoleKind, name_for_id
from squadron.domain.app_acts import DASHBOARD_LABEL
from squadron.domain.change_set_dashboard import change_sets_section
from squadron.domain.change_sets import ChangeSet
from squadron.domain.cost import DEFAULT_PRICES, PriceTable, agent_cost, issue_costs, usd
from squadron.domain.memory import MemoryFact, MemoryPolicy
from squadron.domain.outbox import FailedEffect
from squadron.domain.permissions import untagged
from squadron.domain.pipeline_runs import RunSummary

TITLE = "Squadron dashboard"
LABEL = DASHBOARD_LABEL
MARKER = "<!-- squadron:dashboard"
_MARKER_RE = re.compile(r"<!-- squadron:dashboard digest=([0-9a-f]{16}) -->")
#: Agents listed per status at most (a busy repository's dashboard stays readable and small).
MAX_ROWS = 50
#: Issues drawn in the blocker graph at most (Mermaid renders large graphs poorly).
MAX_GRAPH_NODES = 60
#: The longest issue title a node of the blocker graph shows.
MAX_GRAPH_TITLE = 40
#: Ended agents the "Recently ended" section lists at most, and how far back it looks.
MAX_ENDED = 10
ENDED_WINDOW = timedelta(days=7)
#: github.com's web address; GitHub Enterprise Server's is the deployment's (``web_url``).
GITHUB_WEB_URL = "https://github.com"

_ORDER = (
    AgentStatus.ESCALATED,
    AgentStatus.ACTIVE,
    AgentStatus.CREATED,
    AgentStatus.SLEEPING,
    AgentStatus.COMPLETED,
    AgentStatus.CANCELLED,
)


@dataclass(frozen=True)
class GateView:
    """The merge gate's latest verdict on a pull request and why (its squadron/merge status)."""

    verdict: str
    description: str = ""


@dataclass(frozen=True)
class _Links:
    """A repository's links, built from the deployment's GitHub web address (github.com, or a
    GitHub Enterprise Server's)."""

    repo: str
    web_url: str = GITHUB_WEB_URL

    def issue_url(self, number: int) -> str:
        return f"{self.web_url.rstrip('/')}/{self.repo}/issues/{number}"

    def issue(self, number: int | None) -> str:
        return f"[#{number}]({self.issue_url(number)})" if number is not None else "the PM"

    def pr(self, number: int | None) -> str:
        return (
            f"[#{number}]({self.web_url.rstrip('/')}/{self.repo}/pull/{number})"
            if number is not None
            else "-"
        )


#: Markdown that would make text into something else: links, images, code, emphasis, tables.
_MARKUP = re.compile(r"([\\`*_~\[\]])")
#: What GitHub turns into a notification or a cross-reference: ``@login``, ``#12``, ``o/r#12``.
_PINGS = re.compile(r"([@#])(?=[A-Za-z0-9])")
#: The longest free text one cell shows.
MAX_CELL = 200


def _cell(text: str) -> str:
    """Text from elsewhere (agents, reviewers, CI names) shown as text in one Markdown table cell
    or list item: no pipes, no line breaks, no HTML, no links or emphasis, no @mention or
    issue reference GitHub would act on (a zero-width space after ``@`` and ``#``), bounded."""
    flat = " ".join(text.split())
    if len(flat) > MAX_CELL:
        flat = flat[: MAX_CELL - 1] + "…"
    flat = _MARKUP.sub(r"\\\1", flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))
    return _PINGS.sub("\\1&#8203;", flat.replace("|", "\\|"))


#: A checkbox line's hidden action: ``retry`` an escalated agent, ``wake`` a sleeping one, ``cancel``.
_ACTION_RE = re.compile(r"^- \[[xX]\] .*<!-- squadron:act (retry|wake|cancel) (\d+-[A-Za-z0-9-]+) -->\s*$")
#: Most actions one edit of the dashboard carries out.
MAX_ACTIONS = 20


def _action_line(verb: str, label: str, agent: AgentRecord, repo: _Links) -> str:
    return (
        f"- [ ] {label} `{agent.display_name}` ({repo.issue(agent.issue_number)}) "
        f"<!-- squadron:act {verb} {agent.agent_id} -->"
    )


def _actions_section(repo: _Links, agents: Sequence[AgentRecord]) -> list[str]:
    lines: list[str] = []
    for agent in sorted(agents, key=lambda a: a.agent_id):
        if agent.status is AgentStatus.ESCALATED:
            lines.append(_action_line("retry", "Retry", agent, repo))
        elif agent.status is AgentStatus.SLEEPING:
            lines.append(_action_line("wake", "Wake", agent, repo))
    for agent in sorted(agents, key=lambda a: a.agent_id):
        if agent.status not in TERMINAL and agent.kind is not RoleKind.PM:
            lines.append(_action_line("cancel", "Cancel", agent, repo))
    if not lines:
        return []
    return [
        "## Act",
        "",
        "Tick a box to act (people with write access to this repository; anyone else's ticks are "
        "undone and ignored).",
        "",
        *lines[: 2 * MAX_ROWS],
        "",
    ]


def refused_tick_note(login: str, why: str, ticked: int) -> str:
    """The comment on the dashboard issue when a tick was refused: whose, why, what happens."""
    boxes = "a box" if ticked == 1 else f"{ticked} boxes"
    return (
        f"A tick on this dashboard was refused: {_cell(login)} ticked {boxes}, and only people with "
        f"write access to this repository act from here ({_cell(why)}). Nothing was done; the next "
        "update of the dashboard clears the tick."
    )


def checked_actions(body: str) -> list[tuple[str, str]]:
    """The (action, agent id) of each ticked box of a dashboard body, in order, each once."""
    found: list[tuple[str, str]] = []
    for line in body.splitlines():
        match = _ACTION_RE.match(line.strip())
        if match and (match.group(1), match.group(2)) not in found:
            found.append((match.group(1), match.group(2)))
    return found[:MAX_ACTIONS]


#: A ticked box confirming a fact of the repository's memory (:mod:`squadron.domain.memory`).
_CONFIRM_RE = re.compile(r"^- \[[xX]\] .*<!-- squadron:remember (m-[0-9a-f]{12}) -->\s*$")
#: Proposals listed for confirmation at most.
MAX_PROPOSALS = 20


def checked_confirmations(body: str) -> list[str]:
    """The fact ids whose "confirm" box is ticked, in order, each once."""
    found: list[str] = []
    for line in body.splitlines():
        match = _CONFIRM_RE.match(line.strip())
        if match and match.group(1) not in found:
            found.append(match.group(1))
    return found[:MAX_ACTIONS]


def _memory_section(
    repo: _Links, facts: Sequence[MemoryFact], now: datetime, policy: MemoryPolicy
) -> list[str]:
    """What the repository's memory holds, and the proposals waiting for a person: a ticked box
    shares one with every agent (people with write access; see docs/memory.md)."""
    current = [f for f in facts if not f.expired(policy, now)]
    if not current:
        return []
    confirmed = [f for f in current if f.status == "confirmed"]
    pinned = sum(1 for f in confirmed if f.pinned)
    proposals = sorted(
        (f for f in current if f.status == "proposed"), key=lambda f: (f.created_at, f.fact_id)
    )
    lines = [
        "## Memory",
        "",
        f"{len(confirmed)} confirmed facts ({pinned} pinned), {len(proposals)} waiting for a person. "
        f"`squadron memory list --repo {repo.repo}` shows them all.",
        "",
    ]
    top = sorted(confirmed, key=lambda f: (not f.pinned, -f.use_count, f.fact_id))[:10]
    if top:
        lines += ["| Fact | Learned from | Uses |", "| --- | --- | --- |"]
        for fact in top:
            mark = " (pinned)" if fact.pinned else ""
            source = f"[{fact.evidence.label()}]({fact.evidence.url(repo.repo, web_url=repo.web_url)})"
            lines.append(f"| {_cell(fact.text)}{mark} | {source} | {fact.use_count} |")
        lines.append("")
    if proposals:
        lines += [
            "Proposed by agents, seen only by the agent that wrote each until confirmed. Tick to share "
            "one with every agent:",
            "",
        ]
        for fact in proposals[:MAX_PROPOSALS]:
            lines.append(
                f"- [ ] Confirm: {_cell(fact.text)} (`{name_for_id(fact.agent_id)}`, from {fact.evidence.label()}) "
                f"<!-- squadron:remember {fact.fact_id} -->"
            )
        if len(proposals) > MAX_PROPOSALS:
            lines.append(
                f"- … and {len(proposals) - MAX_PROPOSALS} more (`squadron memory list --repo {repo.repo}`)"
            )
        lines.append("")
    return lines


def _agents_section(repo: _Links, agents: Sequence[AgentRecord], prices: PriceTable) -> list[str]:
    lines = ["## Agents", ""]
    if not agents:
        return [*lines, "No agents at work.", ""]
    counts = {s: sum(1 for a in agents if a.status is s) for s in _ORDER}
    lines.append(", ".join(f"{n} {s.value.lower()}" for s, n in counts.items() if n) + ".")
    lines += [
        "",
        "| Status | Agent | Issue | PR | Blocked by | Cost |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    shown = 0
    for status in _ORDER:
        for agent in sorted((a for a in agents if a.status is status), key=lambda a: a.agent_id):
            if shown == MAX_ROWS:
                break
            shown += 1
            blocked = ", ".join(repo.issue(n) for n in sorted(agent.blocked_by)) or "-"
            cost = agent_cost(agent, prices)
            lines.append(
                f"| {status.value} | `{agent.display_name}` | {repo.issue(agent.issue_number)} "
                f"| {repo.pr(agent.pr_number)} | {blocked} | {usd(cost.total_usd)} |"
            )
    if len(agents) > shown:
        lines.append(f"| | … and {len(agents) - shown} more | | | | |")
    return [*lines, ""]


def _node(number: int) -> str:
    return f"i{number}"


#: What a Mermaid label shows as it is; any other character is written as its entity (``#35;``).
_MERMAID_PLAIN = re.compile(r"[A-Za-z0-9 .,:!?'()/+=-]")


def mermaid_text(text: str, limit: int = MAX_GRAPH_TITLE) -> str:
    """``text`` (an issue's title: anyone's words) as the text of a quoted Mermaid label: one line,
    at most ``limit`` characters, every character that could end the label, open a link, a tag or
    markup (quotes, brackets, ``<``, backticks, ``#``, ``@``, ``|``, ``;``) written as an entity."""
    flat = " ".join(text.split())
    if len(flat) > limit:
        flat = flat[: limit - 1].rstrip() + "…"
    return "".join(c if _MERMAID_PLAIN.fullmatch(c) else f"#{ord(c)};" for c in flat)


def mermaid_graph(
    agents: Sequence[AgentRecord],
    titles: Mapping[int, str] | None = None,
    *,
    links: _Links | None = None,
) -> str | None:
    """The blocker graph as a Mermaid flowchart (an issue points at what blocks it), or None: each
    node an issue's number, title (:func:`mermaid_text`) and status, a ``click`` to the issue."""
    edges = sorted({(a.issue_number, b) for a in agents if a.issue_number is not None for b in a.blocked_by})
    if not edges:
        return None
    numbers = _graph_numbers(edges)
    status = {a.issue_number: a.status.value for a in agents if a.kind is RoleKind.DEV}
    titles = titles or {}
    lines = ["flowchart LR"]
    for number in numbers:
        title = f": {mermaid_text(titles[number])}" if titles.get(number) else ""
        label = f"#{number}" + (f" {status[number].lower()}" if number in status else "") + title
        lines.append(f'    {_node(number)}["{label}"]')
    for issue, blocker in edges:
        if issue in numbers and blocker in numbers:
            lines.append(f"    {_node(issue)} -->|blocked by| {_node(blocker)}")
    if links is not None:
        lines += [f'    click {_node(n)} href "{links.issue_url(n)}" "#{n}"' for n in numbers]
    return "\n".join(lines)


def _graph_numbers(edges: Sequence[tuple[int, int]]) -> list[int]:
    return sorted({n for edge in edges for n in edge})[:MAX_GRAPH_NODES]


def _graph_section(repo: _Links, agents: Sequence[AgentRecord], titles: Mapping[int, str]) -> list[str]:
    """The graph, and under it each issue drawn as a link with its title (GitHub draws Mermaid
    without its clicks: the list is what a person follows)."""
    graph = mermaid_graph(agents, titles, links=repo)
    if graph is None:
        return []
    edges = sorted({(a.issue_number, b) for a in agents if a.issue_number is not None for b in a.blocked_by})
    legend = [
        f"- {repo.issue(n)}"
        + (f" {_cell(_bounded(titles[n], MAX_GRAPH_TITLE * 2))}" if titles.get(n) else "")
        for n in _graph_numbers(edges)
    ]
    return ["## Blockers", "", "```mermaid", graph, "```", "", *legend, ""]


def _bounded(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _ended_section(repo: _Links, ended: Sequence[AgentRecord], now: datetime) -> list[str]:
    """A trace of the agents that ended lately (completed or cancelled: by whom, when), newest
    first, at most :data:`MAX_ENDED` of the last :data:`ENDED_WINDOW`."""
    recent = sorted(
        (
            a
            for a in ended
            if a.status in TERMINAL
            and a.repo_full_name == repo.repo
            and (a.finished_at or a.updated_at) >= now - ENDED_WINDOW
        ),
        key=lambda a: (a.finished_at or a.updated_at, a.agent_id),
        reverse=True,
    )
    if not recent:
        return []
    lines = ["## Recently ended", ""]
    for agent in recent[:MAX_ENDED]:
        when = (agent.finished_at or agent.updated_at).strftime("%Y-%m-%d %H:%M")
        why = _cell(agent.end_reason) if agent.end_reason else "no reason recorded"
        lines.append(
            f"- {when} UTC `{agent.display_name}` ({repo.issue(agent.issue_number)}) "
            f"{agent.status.value.lower()}: {why}"
        )
    if len(recent) > MAX_ENDED:
        lines.append(f"- … and {len(recent) - MAX_ENDED} more in the last {ENDED_WINDOW.days} days")
    return [*lines, ""]


def _gate_reasons(gate: GateView) -> str:
    """What the gate waits for, from its squadron/merge status ("waiting: waiting on ci; ...")."""
    reasons = gate.description.removeprefix(f"{gate.verdict}:").strip()
    return f": {_cell(reasons)}" if reasons else ""


def _pull_requests_section(
    repo: _Links, agents: Sequence[AgentRecord], gates: Mapping[int, GateView]
) -> list[str]:
    open_prs = sorted(
        (
            a
            for a in agents
            if a.kind is RoleKind.DEV and a.pr_number is not None and a.status not in TERMINAL
        ),
        key=lambda a: a.pr_number or 0,
    )
    if not open_prs:
        return []
    lines = ["## Pull requests", "", "| PR | Issue | Merge gate |", "| --- | --- | --- |"]
    for agent in open_prs[:MAX_ROWS]:
        gate = gates.get(agent.pr_number or 0)
        said = f"**{_cell(gate.verdict)}**" + _gate_reasons(gate) if gate else "not judged yet"
        lines.append(f"| {repo.pr(agent.pr_number)} | {repo.issue(agent.issue_number)} | {said} |")
    return [*lines, ""]


def _escalations_section(repo: _Links, agents: Sequence[AgentRecord]) -> list[str]:
    waiting = sorted((a for a in agents if a.status is AgentStatus.ESCALATED), key=lambda a: a.agent_id)
    if not waiting:
        return []
    lines = ["## Waiting for a human", ""]
    for agent in waiting[:MAX_ROWS]:
        reason = _cell(agent.escalation_reason or "no reason given")
        lines.append(f"- {repo.issue(agent.issue_number)} `{agent.display_name}`: {reason}")
    return [*lines, ""]


def _failed_section(repo: _Links, failed: Sequence[FailedEffect]) -> list[str]:
    """What Squadron decided and GitHub refused for good (or that failed too often): a human
    may want to do it by hand. Newest first, as the registry lists them."""
    if not failed:
        return []
    lines = ["## Not carried out", ""]
    for effect in failed[:MAX_ROWS]:
        where = repo.issue(effect.number) if effect.number is not None else repo.repo
        when = effect.at.strftime("%Y-%m-%d %H:%M")
        lines.append(f"- {when} UTC {where} `{effect.effect}`: {_cell(effect.reason)}")
    return [*lines, ""]


def _cost_section(repo: _Links, agents: Sequence[AgentRecord], prices: PriceTable) -> list[str]:
    costs = issue_costs(agents, prices)
    if not costs:
        return []
    lines = ["## Cost so far", "", "| Issue | Its agents | With its blockers |", "| --- | --- | --- |"]
    for number, (own, tree) in list(costs.items())[:MAX_ROWS]:
        lines.append(f"| {repo.issue(number)} | {usd(own.total_usd)} | {usd(tree.total_usd)} |")
    unpriced = sorted({m for own, _ in costs.values() for m in own.unpriced})
    if unpriced:
        lines += ["", f"No price for {', '.join(unpriced)}: add it to `pricing` in .squadron/config.yaml."]
    return [*lines, ""]


#: Running pipeline runs the "Pipelines" section shows (the rest are counted).
MAX_PIPELINE_RUNS = 10


def _pipelines_section(repo: _Links, runs: Sequence[RunSummary], more: int) -> list[str]:
    """The repository's running pipeline runs: each one's current stages, what they wait for,
    and its page in the Step Functions console. Stage names and what they wait for come from the
    repository's configuration: shown as text."""
    if not runs and not more:
        return []
    lines = [
        "## Pipelines",
        "",
        "| Run | Issue | Version | Now | Waits for | Since |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for run in runs[:MAX_PIPELINE_RUNS]:
        stages = "<br>".join(_cell(w.state) for w in run.waiting) or "-"
        waits = "<br>".join(_cell(w.waits_for) for w in run.waiting) or "-"
        since = min((w.entered_at for w in run.waiting), default=run.started_at)
        lines.append(
            f"| [{_cell(run.pipeline)}]({run.console}) | {repo.issue(run.issue_number) if run.issue_number else '-'} "
            f"| {run.version if run.version is not None else '-'} | {stages} | {waits} "
            f"| {since.strftime('%Y-%m-%d %H:%M')} UTC |"
        )
    hidden = more + max(0, len(runs) - MAX_PIPELINE_RUNS)
    if hidden:
        lines += [
            "",
            f"... and {hidden} more running: `squadron pipelines list --repo {repo.repo} --status RUNNING`.",
        ]
    return [*lines, ""]


def render(
    repo: str,
    agents: Sequence[AgentRecord],
    *,
    gates: Mapping[int, GateView] | None = None,
    prices: PriceTable = DEFAULT_PRICES,
    memory: Sequence[MemoryFact] = (),
    memory_policy: MemoryPolicy | None = None,
    failed: Sequence[FailedEffect] = (),
    ended: Sequence[AgentRecord] = (),
    titles: Mapping[int, str] | None = None,
    web_url: str = GITHUB_WEB_URL,
    pipelines: Sequence[RunSummary] = (),
    pipelines_more: int = 0,
    change_sets: Sequence[ChangeSet] = (),
    now: datetime,
) -> str:
    """The dashboard issue's body (without its marker: :func:`with_marker` adds it).

    ``ended``: agents that finished (the "Recently ended" trace); ``titles``: issue titles by
    number (the blocker graph's); ``web_url``: GitHub's web address every link is built from;
    ``pipelines``: the running pipeline runs (``pipelines_more``: how many more were not read)."""
    links = _Links(repo, web_url)
    parts = [
        f"What Squadron's agents are doing in {repo}. Kept up to date by Squadron; edits here are "
        "overwritten. Turn it off with `dashboard: false` in .squadron/config.yaml.",
        "",
        *_escalations_section(links, agents),
        *_failed_section(links, failed),
        *_actions_section(links, agents),
        *_pipelines_section(links, pipelines, pipelines_more),
        *change_sets_section(repo, change_sets),
        *_agents_section(links, agents, prices),
        *_ended_section(links, ended, now),
        *_graph_section(links, agents, titles or {}),
        *_pull_requests_section(links, agents, gates or {}),
        *_cost_section(links, agents, prices),
        *_memory_section(links, memory, now, memory_policy or MemoryPolicy()),
        f"_Updated {now.strftime('%Y-%m-%d %H:%M')} UTC._",
    ]
    return "\n".join(parts)


def body_digest(body: str) -> str:
    """What identifies a body's content, the update time left out (so only changes edit it)."""
    content = re.sub(r"_Updated [^_]*_", "", body)
    return hashlib.sha256(content.encode()).hexdigest()[:16]


def with_marker(body: str) -> str:
    return f"{body}\n\n{MARKER} digest={body_digest(body)} -->"


def digest_of(existing: str | None) -> str | None:
    """The digest the dashboard issue's current body carries (None: no marker)."""
    found = _MARKER_RE.findall(existing or "")
    return found[-1] if found else None  # the marker is the body's last line


def current_digest(existing: str | None) -> str:
    """The digest of what the issue shows now (its marker left out, and the role tag the GitHub
    adapter puts before every body it writes: :func:`squadron.domain.permissions.tagged`): a box
    someone ticked, or any other edit, makes it differ from the next rendering, which then puts
    the body back."""
    text = untagged((existing or "").replace("\r\n", "\n"))
    head, _, last = text.rstrip().rpartition("\n\n")
    return body_digest(head if last.startswith(MARKER) else text)
