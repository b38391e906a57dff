"""``parse_files({relative path: text}) -> SquadronConfig`` — pure, no I/O.

Each file is parsed with line numbers, merged over the documented defaults
(mappings merge key by key; ``null`` removes a default entry; lists replace),
validated by its model, then the files are checked against each other (roles,
agent definitions, human groups). Every problem of every file is collected into
one :class:`~squadron.domain.repo_config.errors.ConfigError`.
"""

from __future__ import annotations

import difflib
import functools
import types
import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from squadron.config.agents import (
    PROMPT_ALLOWED,
    WAKE_ALLOWED,
    FrontMatterError,
    placeholder_problems,
    split_front_matter,
)
from squadron.config.builtin import BUILTIN_AGENTS, DEFAULT_WAKE_PROMPT
from squadron.config.yamlsource import LineMap, YamlProblems, dotted, load_yaml
from squadron.domain.repo_config.constants import (
    AGENTS_DIR,
    APPROVAL_FLOWS_FILE,
    CONFIG_DIR,
    CONFIG_FILE,
    CONTEXT_FILE,
)
from squadron.domain.repo_config.errors import ConfigError, Problem
from squadron.domain.repo_config.limits import MAX_CONTEXT_CHARS
from squadron.domain.repo_config.models import (
    AgentDefinition,
    AgentFrontMatter,
    ApprovalFlow,
    ApprovalFlowsFile,
    BranchRule,
    BreakerLimits,
    Lifecycle,
    Provider,
    RepoConfig,
    RoleKind,
)

ModelT = TypeVar("ModelT", bound=BaseModel)
KeyPath = tuple[str | int, ...]


class ResolvedRole(BaseModel):
    """A role with everything decided: what the agent host needs to start a session."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: RoleKind
    lifecycle: Lifecycle
    model: str
    provider: Provider
    agent: AgentDefinition
    limits: BreakerLimits
    max_concurrent: int | None
    wake_prompt: str


class SquadronConfig(BaseModel):
    """A repository's whole configuration: config.yaml, agent definitions, approval flows."""

    model_config = ConfigDict(frozen=True)

    config: RepoConfig
    agents: dict[str, AgentDefinition]
    approval_flows: ApprovalFlowsFile
    files: tuple[str, ...] = Field(default=(), description="Files read, relative to .squadron/.")
    defaults: tuple[str, ...] = Field(
        default=(), description="Files absent, whose documented defaults apply."
    )
    commit_sha: str | None = Field(default=None, description="The default-branch commit it was read at.")
    context: str = Field(
        default="", description="The shared context (.squadron/context.md) every agent reads."
    )

    def role(self, name: str) -> ResolvedRole:
        """Role ``name`` resolved: role config over agent front matter over documented defaults."""
        role = self.config.roles[name]
        agent = self.agents[role.agent or name]
        lifecycle: Lifecycle = (
            role.lifecycle or agent.lifecycle or ("ephemeral" if role.kind == "pm" else "persistent")
        )
        return ResolvedRole(
            name=name,
            kind=role.kind,
            lifecycle=lifecycle,
            model=role.model or agent.model or self.config.default_model,
            provider=role.provider,
            agent=agent,
            limits=self.config.circuit_breakers.limits_for(name),
            max_concurrent=self.config.runtime.max_concurrent_per_role.get(name),
            wake_prompt=agent.wake_prompt or DEFAULT_WAKE_PROMPT,
        )

    def branch_for(self, role: str, issue_number: int, labels: Sequence[str] = ()) -> str:
        template = self.config.branch_naming.template_for(role, list(labels))
        return template.format(issue_number=issue_number, role=role)

    @property
    def uses_defaults_only(self) -> bool:
        return not self.files


# --- the parse ---------------------------------------------------------------------------------


def parse_files(files: Mapping[str, str], *, root: str = CONFIG_DIR) -> SquadronConfig:
    """Parse a ``.squadron`` directory given as {path relative to it: text}.

    ``root`` prefixes file names in problems. An empty mapping (no ``.squadron/``)
    gives the documented defaults with the built-in agent definitions.
    """
    ctx = _Context(root)
    ctx.check_file_names(files)

    config_doc = ctx.load_mapping(CONFIG_FILE, files.get(CONFIG_FILE))
    merged_config = _deep_merge(_defaults_of(RepoConfig), config_doc.data)
    _prune_default_role_refs(merged_config, config_doc.lines)
    repo_config = ctx.validate(RepoConfig, merged_config, CONFIG_FILE, config_doc.lines)

    agents = dict(_builtin_agents())
    for rel in sorted(files):
        if _is_agent_file(rel):
            agent = ctx.parse_agent(rel, files[rel])
            if agent is not None:
                agents[agent.name] = agent

    flows_doc = ctx.load_mapping(APPROVAL_FLOWS_FILE, files.get(APPROVAL_FLOWS_FILE))
    merged_flows = _deep_merge(_defaults_of(ApprovalFlowsFile), flows_doc.data)
    if repo_config is not None:
        _prune_default_reviews(merged_flows, flows_doc.lines, repo_config)
    flows = ctx.validate(ApprovalFlowsFile, merged_flows, APPROVAL_FLOWS_FILE, flows_doc.lines)

    directory = _Directory.of(repo_config, merged_config)
    if repo_config is not None:
        ctx.check_config_references(repo_config, agents, config_doc.lines, directory)
    if flows is not None:
        ctx.check_flow_references(flows, flows_doc.lines, directory)

    context = files.get(CONTEXT_FILE, "").strip()
    if len(context) > MAX_CONTEXT_CHARS:
        ctx.add(
            CONTEXT_FILE,
            None,
            (),
            f"is {len(context)} characters, over the limit of {MAX_CONTEXT_CHARS} for the shared context "
            "every agent starts with (MAX_CONTEXT_CHARS): keep what every agent needs",
        )
    if ctx.problems or repo_config is None or flows is None:
        raise ConfigError(ctx.problems)
    return SquadronConfig(
        context=context,
        config=repo_config,
        agents=agents,
        approval_flows=flows,
        files=tuple(sorted(files)),
        defaults=tuple(name for name in (CONFIG_FILE, APPROVAL_FLOWS_FILE) if name not in files),
    )


class _Document:
    def __init__(self, data: dict[str, Any] | None = None, lines: LineMap | None = None) -> None:
        self.data: dict[str, Any] = data or {}
        self.lines = lines or LineMap()


class _Context:
    def __init__(self, root: str) -> None:
        self.root = root
        self.problems: list[Problem] = []

    def file(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    def add(self, rel: str, line: int | None, path: Sequence[str | int], message: str) -> None:
        self.problems.append(Problem(self.file(rel), line, dotted(path), message))

    def check_file_names(self, files: Mapping[str, str]) -> None:
        known = {CONFIG_FILE, APPROVAL_FLOWS_FILE}
        for rel in files:
            folder, _, name = rel.rpartition("/")
            if rel in known or _is_agent_file(rel) or folder not in ("", "workflows"):
                continue
            if name.endswith((".yaml", ".yml")):
                expected = CONFIG_FILE if folder == "" else APPROVAL_FLOWS_FILE
                self.add(rel, None, (), f"unknown configuration file; did you mean {self.file(expected)}?")

    def load_mapping(self, rel: str, text: str | None) -> _Document:
        if text is None:
            return _Document()
        try:
            doc = load_yaml(text, self.file(rel))
        except YamlProblems as exc:
            self.problems.extend(exc.problems)
            return _Document()
        if doc.data is None:
            return _Document(lines=doc.lines)
        if not isinstance(doc.data, dict):
            self.add(rel, doc.lines.line_of(()), (), "the file must hold a mapping of keys to values")
            return _Document()
        return _Document(doc.data, doc.lines)

    def validate(self, model: type[ModelT], data: Any, rel: str, lines: LineMap) -> ModelT | None:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            self.problems.extend(validation_problems(exc, self.file(rel), data, lines, model))
            return None

    def parse_agent(self, rel: str, text: str) -> AgentDefinition | None:
        file = self.file(rel)
        try:
            source = split_front_matter(text, file)
        except FrontMatterError as exc:
            self.problems.append(exc.problem)
            return None
        try:
            doc = load_yaml(source.front_matter, file, line_offset=source.front_matter_line - 1)
        except YamlProblems as exc:
            self.problems.extend(exc.problems)
            return None
        if not isinstance(doc.data, dict):
            self.add(
                rel, source.front_matter_line, (), "the front matter must be a mapping of keys to values"
            )
            return None
        front = self.validate(AgentFrontMatter, doc.data, rel, doc.lines)
        stem = rel.removeprefix(f"{AGENTS_DIR}/").removesuffix(".md")
        before = len(self.problems)
        if front is not None and front.name != stem:
            self.add(rel, doc.lines.line_of(("name",)), ("name",), f"must match the file name ({stem!r})")
        if not source.body.strip():
            self.add(rel, source.body_line, (), "the system prompt (the Markdown body) is empty")
        self.problems.extend(
            placeholder_problems(
                source.body, file=file, first_line=source.body_line, key_path="", allowed=PROMPT_ALLOWED
            )
        )
        wake = doc.data.get("wake_prompt")
        if isinstance(wake, str):
            self.problems.extend(
                placeholder_problems(
                    wake,
                    file=file,
                    first_line=doc.lines.line_of(("wake_prompt",)),
                    key_path="wake_prompt",
                    allowed=WAKE_ALLOWED,
                    same_line=True,
                )
            )
        if front is None or len(self.problems) > before:
            return None
        return AgentDefinition(**front.model_dump(), prompt=source.body.strip() + "\n", source=file)

    # --- cross-references ---------------------------------------------------------------------

    def check_config_references(
        self, config: RepoConfig, agents: Mapping[str, AgentDefinition], lines: LineMap, directory: _Directory
    ) -> None:
        rel = CONFIG_FILE
        roles = config.roles

        def refer(path: KeyPath, role: str, *, kinds: tuple[str, ...] = ()) -> None:
            found = roles.get(role)
            if found is None:
                self.add(rel, lines.line_of(path), path, f"unknown role {role!r}{_did_you_mean(role, roles)}")
            elif kinds and found.kind not in kinds:
                self.add(
                    rel,
                    lines.line_of(path),
                    path,
                    f"role {role!r} is a {found.kind} role, not {' or '.join(kinds)}",
                )

        pm_roles = [name for name, role in roles.items() if role.kind == "pm"]
        if len(pm_roles) != 1:
            self.add(
                rel,
                lines.line_of(("roles",)),
                ("roles",),
                f"exactly one role must be of kind pm (found {len(pm_roles)})",
            )
        for name, role in roles.items():
            agent_name = role.agent or name
            if agent_name not in agents:
                path: KeyPath = ("roles", name, "agent") if role.agent else ("roles", name)
                self.add(
                    rel,
                    lines.line_of(path),
                    path,
                    f"no agent definition {agent_name!r} ({AGENTS_DIR}/{agent_name}.md){_did_you_mean(agent_name, agents)}",
                )
        refer(("default_dev_role",), config.default_dev_role, kinds=("dev",))
        for name, label in config.labels.items():
            if label.role is not None:
                refer(("labels", name, "role"), label.role, kinds=("dev",))
        for name in config.branch_naming.roles:
            refer(("branch_naming", "roles", name), name)
        for label_name in config.branch_naming.labels:
            if label_name not in config.labels:
                path = ("branch_naming", "labels", label_name)
                self.add(
                    rel,
                    lines.line_of(path),
                    path,
                    f"unknown label {label_name!r}{_did_you_mean(label_name, config.labels)}",
                )
        for name in config.circuit_breakers.roles:
            refer(("circuit_breakers", "roles", name), name)
        for name in config.runtime.max_concurrent_per_role:
            refer(("runtime", "max_concurrent_per_role", name), name)
        for index, who in enumerate(config.escalation.notify):
            self.check_principal(
                rel, ("escalation", "notify", index), who, directory, lines, humans_only=True
            )

    def check_flow_references(self, flows: ApprovalFlowsFile, lines: LineMap, directory: _Directory) -> None:
        for path, who, humans_only in _flow_principals(flows):
            self.check_principal(APPROVAL_FLOWS_FILE, path, who, directory, lines, humans_only=humans_only)

    def check_principal(
        self, rel: str, path: KeyPath, who: str, directory: _Directory, lines: LineMap, *, humans_only: bool
    ) -> None:
        kind, _, name = who.partition(":")
        line = lines.line_of(path)
        if kind == "agent":
            role_kind = directory.roles.get(name, "")
            if humans_only:
                self.add(
                    rel,
                    line,
                    path,
                    f"{who!r}: only humans are notified (human_group:<group> or user:<login>)",
                )
            elif name not in directory.roles:
                self.add(rel, line, path, f"unknown role {name!r}{_did_you_mean(name, directory.roles)}")
            elif role_kind and role_kind != "review":
                self.add(rel, line, path, f"role {name!r} is a {role_kind} role; reviews need a review role")
        elif kind == "human_group" and name not in directory.human_groups:
            self.add(
                rel,
                line,
                path,
                f"unknown human group {name!r} (define it under human_groups in {CONFIG_FILE})"
                + _did_you_mean(name, directory.human_groups),
            )


@dataclass(frozen=True)
class _Directory:
    """Role kinds and human group names, from the valid config or, if it is invalid, from its raw data."""

    roles: Mapping[str, str]
    human_groups: frozenset[str]

    @classmethod
    def of(cls, config: RepoConfig | None, raw: Any) -> _Directory:
        if config is not None:
            return cls({n: r.kind for n, r in config.roles.items()}, frozenset(config.human_groups))
        raw = raw if isinstance(raw, dict) else {}
        roles = raw.get("roles") if isinstance(raw.get("roles"), dict) else {}
        groups = raw.get("human_groups") if isinstance(raw.get("human_groups"), dict) else {}
        kinds: dict[str, str] = {
            str(n): str(r.get("kind")) if isinstance(r, dict) and isinstance(r.get("kind"), str) else ""
            for n, r in roles.items()
        }
        return cls(kinds, frozenset(str(g) for g in groups))


def _flow_principals(flows: ApprovalFlowsFile) -> Iterator[tuple[KeyPath, str, bool]]:
    parts: list[tuple[KeyPath, ApprovalFlow | BranchRule]] = [(("default",), flows.default)]
    parts += [(("branch_rules", index), rule) for index, rule in enumerate(flows.branch_rules)]
    for prefix, flow in parts:
        for index, review in enumerate(flow.required_reviews or []):
            yield (*prefix, "required_reviews", index, "role"), review.role, False
        for p_index, protected in enumerate(flow.protected_paths or []):
            for index, review in enumerate(protected.required_reviews):
                yield (
                    (*prefix, "protected_paths", p_index, "required_reviews", index, "role"),
                    review.role,
                    False,
                )
        if flow.escalation is not None:
            for rule_name in ("on_ci_failure", "on_review_rejection", "on_timeout"):
                rule = getattr(flow.escalation, rule_name)
                for index, who in enumerate(rule.notify if rule is not None else []):
                    yield (*prefix, "escalation", rule_name, "notify", index), who, True


# --- validation errors with lines ----------------------------------------------------------------


def validation_problems(
    exc: ValidationError, file: str, data: Any, lines: LineMap, model: type[BaseModel]
) -> list[Problem]:
    """One :class:`Problem` per pydantic error, at the line the offending key was written on."""
    problems = []
    for error in exc.errors(include_url=False):
        path = _data_path(error["loc"], data)
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            allowed = _fields_at(model, path[:-1])
            message = f"unknown key {path[-1]!r}" + _did_you_mean(str(path[-1]), allowed)
        elif error["type"] == "missing":
            message = "required key is missing"
        elif error["type"] != "value_error" and isinstance(error.get("input"), str | int | float | bool):
            message += f" (got {error['input']!r})"
        problems.append(Problem(file, lines.line_of(path), dotted(path), message))
    return problems


def _data_path(loc: Sequence[str | int], data: Any) -> KeyPath:
    """The key path in the YAML data of a pydantic ``loc`` (union tags and ``[key]`` dropped)."""
    path: list[str | int] = []
    current = data
    for part in loc:
        if _has_child(current, part):
            path.append(part)
            current = current[part]
        elif not _is_pydantic_marker(part, current):
            path.append(part)
            current = None
    return tuple(path)


def _has_child(current: Any, part: str | int) -> bool:
    if isinstance(current, dict):
        return part in current
    return isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)


def _is_pydantic_marker(part: str | int, current: Any) -> bool:
    """A ``loc`` element naming no key of the data: a dict key check, a union tag, a validator."""
    if not isinstance(part, str):
        return False
    if part == "[key]" or (isinstance(current, dict) and current.get("type") == part):
        return True
    return part.startswith(("function-", "tagged-union["))


def _fields_at(model: type[BaseModel], path: KeyPath) -> list[str]:
    """Field names of the model found at ``path`` below ``model`` (for typo suggestions)."""
    annotations: list[Any] = [model]
    for part in path:
        next_annotations: list[Any] = []
        for annotation in annotations:
            for candidate in _unwrap(annotation):
                if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                    field = candidate.model_fields.get(str(part))
                    if field is not None:
                        next_annotations.append(field.annotation)
                elif typing.get_origin(candidate) in (dict, list):
                    next_annotations.append(typing.get_args(candidate)[-1])
        annotations = next_annotations
    names: list[str] = []
    for annotation in annotations:
        for candidate in _unwrap(annotation):
            if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                names.extend(candidate.model_fields)
    return names


def _unwrap(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [item for arg in typing.get_args(annotation) for item in _unwrap(arg)]
    return [annotation]


#: Suggestions are looked for among at most this many names of at most this length: difflib is
#: quadratic in a name's length, and a hostile file may be full of long names.
_SUGGEST_AMONG = 200
_SUGGEST_LENGTH = 64


def _did_you_mean(value: str, choices: Iterable[str]) -> str:
    names = [name for name in choices if len(name) <= _SUGGEST_LENGTH]
    if len(value) > _SUGGEST_LENGTH or len(names) > _SUGGEST_AMONG:
        return ""
    close = difflib.get_close_matches(value, names, n=1, cutoff=0.7)
    return f" (did you mean {close[0]!r}?)" if close else ""


# --- defaults ----------------------------------------------------------------------------------


def _defaults_of(model: type[BaseModel]) -> dict[str, Any]:
    return model().model_dump(mode="json")


def _deep_merge(base: Any, override: Any) -> Any:
    """``override`` over ``base``: mappings merge key by key, ``None`` drops a key, anything else replaces."""
    if isinstance(base, dict) and isinstance(override, dict):
        result = dict(base)
        for key, value in override.items():
            if value is None:
                result.pop(key, None)
            elif key in result:
                result[key] = _deep_merge(result[key], value)
            else:
                result[key] = value
        return result
    return override


def _prune_default_role_refs(merged: dict[str, Any], lines: LineMap) -> None:
    """Drop default entries that name a role the repository removed (its own entries stay, to be reported)."""
    roles = merged.get("roles")
    if not isinstance(roles, dict):
        return
    for section, key in (
        ("branch_naming", "roles"),
        ("circuit_breakers", "roles"),
        ("runtime", "max_concurrent_per_role"),
    ):
        table = merged.get(section, {}).get(key) if isinstance(merged.get(section), dict) else None
        if isinstance(table, dict):
            for name in [n for n in table if n not in roles and (section, key, n) not in lines.lines]:
                del table[name]
    labels = merged.get("labels")
    naming = merged.get("branch_naming")
    if isinstance(labels, dict) and isinstance(naming, dict) and isinstance(naming.get("labels"), dict):
        table = naming["labels"]
        for name in [
            n for n in table if n not in labels and ("branch_naming", "labels", n) not in lines.lines
        ]:
            del table[name]
    if isinstance(labels, dict):
        for name, label in labels.items():
            if (
                isinstance(label, dict)
                and label.get("role") is not None
                and label["role"] not in roles
                and ("labels", name, "role") not in lines.lines
            ):
                label["role"] = None


def _prune_default_reviews(merged: dict[str, Any], lines: LineMap, config: RepoConfig) -> None:
    default = merged.get("default")
    if not isinstance(default, dict) or ("default", "required_reviews") in lines.lines:
        return
    reviews = default.get("required_reviews")
    if isinstance(reviews, list):
        default["required_reviews"] = [
            r
            for r in reviews
            if not (isinstance(r, dict) and str(r.get("role", "")).startswith("agent:"))
            or str(r["role"]).removeprefix("agent:") in config.roles
        ]


def _is_agent_file(rel: str) -> bool:
    folder, _, name = rel.rpartition("/")
    return folder == AGENTS_DIR and name.endswith(".md") and name.lower() != "readme.md"


@functools.cache
def _builtin_agents() -> Mapping[str, AgentDefinition]:
    ctx = _Context("built-in")
    agents = {}
    for name, text in BUILTIN_AGENTS.items():
        agent = ctx.parse_agent(f"{AGENTS_DIR}/{name}.md", text)
        if agent is not None:
            agents[name] = agent.model_copy(update={"source": "built-in"})
    if ctx.problems:  # a bug in this package, not in the repository
        raise ConfigError(ctx.problems)
    return types.MappingProxyType(agents)
