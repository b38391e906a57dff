"""What ``squadron validate`` says about approval flows and pipelines, beside the problems
(docs/pipelines.md, "Approval flows as pipelines" and "Default pipelines").

* :func:`migration_text` — ``squadron validate --migrate``: the pipelines the repository's
  approval flows are equivalent to, as YAML to paste under ``pipelines:`` (it loads and
  validates as it is), headed by every note on what a gate does not say as the flow does, each
  at its ``file:line``;
* :func:`validate_notices` — the lines ``squadron validate`` adds to its summary: the flows'
  pipelines (info), the built-in pipelines the repository overrides (info), and a warning per
  ``merge_pr`` that the approval flow still governs its merge.

Only texts already parsed cleanly reach here (the line maps are read again from them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from squadron.config.default_pipelines import default_pipelines
from squadron.config.parse.result import SquadronConfig
from squadron.config.yamlsource import LineMap, YamlProblems, dotted, load_yaml
from squadron.domain.pipelines.from_flows import Migration, approval_pipelines, merge_governance
from squadron.domain.pipelines.overrides import overridden
from squadron.domain.repo_config.constants import APPROVAL_FLOWS_FILE, CONFIG_FILE
from squadron.domain.repo_config.limits import MAX_FILE_BYTES

KeyPath = tuple[str | int, ...]


def _lines(texts: Mapping[str, str], rel: str) -> LineMap:
    text = texts.get(rel)
    if text is None:
        return LineMap()
    try:
        return load_yaml(text, rel).lines
    except YamlProblems:  # pragma: no cover - only texts that parsed reach here
        return LineMap()


def _where(root: str, rel: str, lines: LineMap, path: KeyPath) -> str:
    """``file:line:column: key.path`` of ``path`` (or of the nearest key the file spells out; no
    line when it spells out none of it: a documented default)."""
    spelt = any(path[:end] in lines.lines for end in range(1, len(path) + 1))
    line = lines.line_of(path) if spelt else None
    column = lines.column_of(path) if line is not None else None
    where = f"{root}/{rel}" + (f":{line}" if line is not None else "") + (f":{column}" if column else "")
    return f"{where}: {dotted(path)}" if path else where


def migration(config: SquadronConfig) -> Migration:
    """The repository's approval flows as pipelines, named unlike its own."""
    return approval_pipelines(
        config.approval_flows,
        roles=config.config.roles,
        human_groups=config.config.human_groups,
        existing=config.config.pipelines,
    )


def _one_line(text: str) -> str:
    return " ".join(text.split())


def pasteable(
    config: SquadronConfig, texts: Mapping[str, str], *, root: str, lines: LineMap | None = None
) -> Migration:
    """The migration whose YAML, with its comments, fits in config.yaml beside what it holds."""
    lines = lines if lines is not None else _lines(texts, APPROVAL_FLOWS_FILE)
    room = MAX_FILE_BYTES - len(texts.get(CONFIG_FILE, "").encode("utf-8")) - 1
    first = migration(config)
    return fitted(first, room - _comments_size(first, root, lines))


def _comments_size(result: Migration, root: str, lines: LineMap) -> int:
    """An upper bound of the header's bytes (each note one line, plus the fixed lines and those a
    fitting may add)."""
    per_note = [
        len(
            f"#   {_where(root, APPROVAL_FLOWS_FILE, lines, note.path)}: {_one_line(note.message)}\n".encode()
        )
        for note in result.notes
    ]
    return sum(per_note) + 600 * (len(result.pipelines) + 1) + 1000


def migration_text(config: SquadronConfig, texts: Mapping[str, str], *, root: str) -> str:
    """``squadron validate --migrate``: the flows' pipelines as YAML, headed by comments."""
    lines = _lines(texts, APPROVAL_FLOWS_FILE)
    result = pasteable(config, texts, root=root, lines=lines)
    source = (
        f"{root}/{APPROVAL_FLOWS_FILE}"
        if APPROVAL_FLOWS_FILE in texts
        else f"the documented default approval flow (no {root}/{APPROVAL_FLOWS_FILE})"
    )
    head = [
        f"# The pipelines {source} is equivalent to (squadron validate --migrate).",
        f"# Paste them under `pipelines:` in {root}/{CONFIG_FILE}. While the approval flows file exists it",
        "# still applies: merge_pr asks the merge gate, which merges only when the flow is met",
        '# (docs/pipelines.md, "Approval flows as pipelines"). A pull request the App opens (an',
        "# agent's) starts no run: the merge gate alone judges it.",
    ]
    if result.notes:
        head.append("# What these pipelines do not say as the flows do:")
        head += [
            f"#   {_where(root, APPROVAL_FLOWS_FILE, lines, note.path)}: {_one_line(note.message)}"
            for note in result.notes
        ]
    if not result.pipelines:
        return "\n".join([*head, "# (no pipeline)"]) + "\n"
    return "\n".join(head) + "\n" + _dump(result.pipelines)


def _dump(pipelines: Mapping[str, Any]) -> str:
    # leaf lists and mappings in flow style: half the size, as readable
    return yaml.safe_dump(
        {"pipelines": dict(pipelines)},
        sort_keys=False,
        width=100,
        allow_unicode=True,
        default_flow_style=None,
    )


def fitted(result: Migration, room: int) -> Migration:
    """``result`` less its last pipelines (branch rules first, then the default's) until their YAML
    takes at most ``room`` bytes: pasted into config.yaml, it must stay within MAX_FILE_BYTES."""
    names = list(result.pipelines)
    dropped: list[str] = []
    while names and len(_dump({n: result.pipelines[n] for n in names}).encode("utf-8")) > room:
        dropped.append(names.pop())
    if not dropped:
        return result
    return result.without(
        dropped,
        f"config.yaml would pass its {MAX_FILE_BYTES} bytes (MAX_FILE_BYTES) with it; PRs into its "
        "branch run the default pipeline, and the rule still applies through merge_pr's merge gate",
    )


def validate_notices(config: SquadronConfig, texts: Mapping[str, str], *, root: str) -> list[str]:
    """The info and warning lines ``squadron validate`` prints after its summary."""
    out: list[str] = []
    pipelines = config.config.pipelines
    if APPROVAL_FLOWS_FILE in texts:
        result = pasteable(config, texts, root=root)
        shown = ", ".join(
            f"{name} ({len(data['stages'])} stage{'s' if len(data['stages']) != 1 else ''})"
            for name, data in result.pipelines.items()
        )
        notes = len(result.notes)
        out.append(
            f"  info: {root}/{APPROVAL_FLOWS_FILE} is equivalent to the pipelines {shown or '(none)'}"
            + (f", with {notes} note{'s' if notes != 1 else ''} on what a gate does not say" if notes else "")
            + f"; `squadron validate --migrate {root}` prints them to paste under pipelines:"
        )
    builtins = overridden(pipelines, default_pipelines())
    if builtins:
        out.append(
            f"  info: built-in default pipelines overridden by the repository's: {', '.join(builtins)}"
        )
    config_lines = _lines(texts, CONFIG_FILE)
    for path, message in merge_governance(
        pipelines, config.approval_flows, flows_file=APPROVAL_FLOWS_FILE in texts
    ):
        out.append(f"warning: {_where(root, CONFIG_FILE, config_lines, path)}: {message}")
    return out
