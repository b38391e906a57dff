"""One file at a time: the problems found so far, YAML mappings, models, agent definitions.

:class:`ParseContext` collects every problem of the parse (file, line, key path, message);
each configuration file is loaded as a YAML mapping with line numbers and validated by its
model, and each agent definition (front matter and Markdown body) is parsed and checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from squadron.config.agents import (
    PROMPT_ALLOWED,
    WAKE_ALLOWED,
    FrontMatterError,
    placeholder_problems,
    split_front_matter,
)
from squadron.config.parse.problems import validation_problems
from squadron.config.yamlsource import LineMap, YamlProblems, dotted, load_yaml
from squadron.domain.repo_config.constants import AGENTS_DIR, APPROVAL_FLOWS_FILE, CONFIG_FILE
from squadron.domain.repo_config.errors import Problem
from squadron.domain.repo_config.models import AgentDefinition, AgentFrontMatter

ModelT = TypeVar("ModelT", bound=BaseModel)


class _Document:
    def __init__(self, data: dict[str, Any] | None = None, lines: LineMap | None = None) -> None:
        self.data: dict[str, Any] = data or {}
        self.lines = lines or LineMap()


class ParseContext:
    """Where the files of one configuration are (its root) and the problems found in them so far."""

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
            if rel in known or is_agent_file(rel) or folder not in ("", "workflows"):
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


def is_agent_file(rel: str) -> bool:
    folder, _, name = rel.rpartition("/")
    return folder == AGENTS_DIR and name.endswith(".md") and name.lower() != "readme.md"
