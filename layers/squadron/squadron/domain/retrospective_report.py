"""A retrospective's figures written as Markdown for its issue — pure.

Everything from events (reasons, limits, model names) is made inert by :func:`text_cell`: no
mention pings, no reference links, no markup survives.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from datetime import datetime

from squadron.domain.cost import usd
from squadron.domain.history import utc_instant
from squadron.domain.retrospective_figures import MAX_COST_ROWS, MAX_LISTED, ReasonCount, RetroFigures

#: ASCII punctuation: each is backslash-escaped in text from events, so none of it is markup.
_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
#: After ``@`` (a mention) and ``#`` (an issue reference): a zero-width space, so neither pings
#: nor links (as Renovate writes users' text into its issues).
_ZERO_WIDTH = "&#8203;"


def text_cell(text: str, limit: int = 200) -> str:
    """Untrusted text as inert Markdown for one table cell or line.

    One line, no control or format characters, at most ``limit`` characters; every ASCII
    punctuation character backslash-escaped (no emphasis, link, image, code span, HTML tag,
    entity or table pipe survives); ``@`` and ``#`` followed by a zero-width space (no mention
    pings anyone, no reference links an issue).
    """
    kept = "".join(
        " " if c.isspace() else c for c in text if c.isspace() or unicodedata.category(c) not in ("Cc", "Cf")
    )
    flat = " ".join(kept.split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    out: list[str] = []
    for c in flat:
        if c in "@#":
            out.append(f"\\{c}{_ZERO_WIDTH}")
        elif c in _PUNCTUATION:
            out.append(f"\\{c}")
        else:
            out.append(c)
    return "".join(out)


def utc_minute(at: datetime) -> str:
    """``at`` as ``YYYY-MM-DD HH:MM UTC``."""
    return utc_instant(at).strftime("%Y-%m-%d %H:%M UTC")


def _numbers(numbers: Sequence[int]) -> str:
    """``#1, #2, …`` (the first :data:`MAX_LISTED`, then how many more), or ``none``."""
    if not numbers:
        return "none"
    shown = ", ".join(f"#{n}" for n in numbers[:MAX_LISTED])
    return shown if len(numbers) <= MAX_LISTED else f"{shown} and {len(numbers) - MAX_LISTED} more"


def _hours(value: float) -> str:
    return f"{value:.1f} h"


def _more(rows: int, columns: int) -> list[str]:
    """The row saying how many rows past :data:`MAX_COST_ROWS` a table leaves out (none if none)."""
    if rows <= MAX_COST_ROWS:
        return []
    return [f"| *{rows - MAX_COST_ROWS} more* |" + " |" * (columns - 1)]


def _reasons_table(title: str, what: str, rows: Sequence[ReasonCount], other: int) -> list[str]:
    lines = [f"**{title}**", ""]
    if not rows:
        return [*lines, "None.", ""]
    lines += [f"| {what} | Count |", "| --- | ---: |"]
    lines += [f"| {text_cell(row.reason)} | {row.count} |" for row in rows]
    if other:
        lines.append(f"| *other reasons* | {other} |")
    return [*lines, ""]


def render_figures(figures: RetroFigures) -> str:
    """The figures as a Markdown section of the retrospective issue (text from events made inert)."""
    f = figures
    lines = [
        f"## Figures, {utc_minute(f.start)} to {utc_minute(f.end)}",
        "",
        f"*Computed by Squadron from the repository's domain events ({f.events} in the period), not by a model.*",
        "",
        "**Agent pull requests**",
        "",
        "| | Count | Pull requests |",
        "| --- | ---: | --- |",
        f"| opened | {len(f.opened)} | {_numbers(f.opened)} |",
        f"| merged | {len(f.merged)} | {_numbers(f.merged)} |",
        f"| rejected (closed without merge) | {len(f.rejected)} | {_numbers(f.rejected)} |",
        "",
        "**Review rounds** (per merged agent pull request: changes requested + 1)",
        "",
    ]
    if f.review_rounds and f.rounds_mean is not None:
        lines += [
            f"Mean {f.rounds_mean:.2f}, max {f.rounds_max}.",
            "",
            "| Pull request | Rounds |",
            "| --- | ---: |",
        ]
        lines += [f"| #{r.pr_number} | {r.rounds} |" for r in f.review_rounds[:MAX_COST_ROWS]]
        lines += _more(len(f.review_rounds), 2)
    else:
        lines.append("No agent pull request was merged.")
    lines.append("")
    lines += _reasons_table(
        "Rejection reasons", "Changes requested because", f.rejection_reasons, f.other_rejections
    )
    lines += ["**Breaker trips**", ""]
    if f.breaker_trips:
        lines += ["| Limit | Trips |", "| --- | ---: |"]
        lines += [f"| {text_cell(t.limit)} | {t.count} |" for t in f.breaker_trips]
    else:
        lines.append("None.")
    lines.append("")
    lines += _reasons_table("Escalations", "Reason", f.escalations, f.other_escalations)
    lines += ["**Assignment to merge** (from the issue's first dev agent start to the merge)", ""]
    if f.merge_times and f.merge_hours_median is not None and f.merge_hours_max is not None:
        lines += [
            f"Median {_hours(f.merge_hours_median)}, max {_hours(f.merge_hours_max)}.",
            "",
            "| Pull request | Issue | Hours |",
            "| --- | --- | ---: |",
        ]
        lines += [f"| #{m.pr_number} | #{m.issue} | {m.hours:.1f} |" for m in f.merge_times[:MAX_COST_ROWS]]
        lines += _more(len(f.merge_times), 3)
    else:
        lines.append("Nothing measured.")
    if f.unmeasured_merges:
        lines += ["", f"Not measured (no recorded start): {_numbers(f.unmeasured_merges)}."]
    reopened = f"{_numbers(f.reopened)}." if f.reopened else "None."
    lines += ["", "**Reopened issues** (that an agent worked on)", "", reopened, ""]
    lines += _cost_lines(f)
    return "\n".join(lines).rstrip("\n") + "\n"


def _cost_lines(f: RetroFigures) -> list[str]:
    lines = ["**Cost**", ""]
    if not f.costs:
        return [*lines, "No usage recorded."]
    lines += ["| Issue | Tokens | Task time | Total | Task seconds |", "| --- | ---: | ---: | ---: | ---: |"]
    for cost in f.costs[:MAX_COST_ROWS]:
        who = f"#{cost.issue}" if cost.issue is not None else "the PM (no issue)"
        lines.append(
            f"| {who} | {usd(cost.tokens_usd)} | {usd(cost.task_usd)} | {usd(cost.total_usd)} | {cost.task_seconds} |"
        )
    rest = f.costs[MAX_COST_ROWS:]
    if rest:
        lines.append(
            f"| *{len(rest)} more* | | | {usd(sum(c.total_usd for c in rest))} | {sum(c.task_seconds for c in rest)} |"
        )
    t = f.total
    lines.append(
        f"| **total** | {usd(t.tokens_usd)} | {usd(t.task_usd)} | **{usd(t.total_usd)}** | {t.task_seconds} |"
    )
    if t.unpriced:
        lines += [
            "",
            "Not priced (no price in the table): " + ", ".join(text_cell(m, 100) for m in t.unpriced) + ".",
        ]
    return lines
