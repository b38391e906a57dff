"""The built-in default pipelines: today's fixed flow in the ``pipelines:`` format (docs/pipelines.md,
"Default pipelines"), shipped as ``default_pipelines.yaml`` beside this module.

:func:`default_pipelines` reads them once (the same bounded YAML reader and models as a
repository's ``pipelines:``); a problem in them is a bug of this package, raised as
:class:`~squadron.domain.repo_config.errors.ConfigError`. A repository overrides one by defining a
pipeline of the same name (:func:`squadron.domain.pipelines.overrides.override_problems` says when
a same-named pipeline cannot be an override).
"""

from __future__ import annotations

import functools
import types
from collections.abc import Mapping
from importlib import resources

from pydantic import ValidationError

from squadron.config.yamlsource import YamlProblems, load_yaml
from squadron.domain.pipelines.models import Pipeline
from squadron.domain.repo_config.errors import ConfigError, Problem

#: The file, in this package.
DEFAULT_PIPELINES_FILE = "default_pipelines.yaml"


def default_pipelines_text() -> str:
    return resources.files("squadron.config").joinpath(DEFAULT_PIPELINES_FILE).read_text("utf-8")


@functools.cache
def default_pipelines() -> Mapping[str, Pipeline]:
    """The built-in pipelines by name (validated by the models; the cross-pipeline checks against
    the documented default roles are the tests')."""
    try:
        document = load_yaml(default_pipelines_text(), DEFAULT_PIPELINES_FILE)
    except YamlProblems as exc:
        raise ConfigError(exc.problems) from exc
    raw = document.data.get("pipelines") if isinstance(document.data, dict) else None
    if not isinstance(raw, dict):
        raise ConfigError([Problem(DEFAULT_PIPELINES_FILE, None, "pipelines", "missing")])
    found: dict[str, Pipeline] = {}
    problems: list[Problem] = []
    for name, data in raw.items():
        try:
            found[name] = Pipeline.model_validate(data)
        except ValidationError as exc:
            problems.append(
                Problem(
                    DEFAULT_PIPELINES_FILE,
                    document.lines.line_of(("pipelines", name)),
                    f"pipelines.{name}",
                    str(exc),
                )
            )
    if problems:
        raise ConfigError(problems)
    return types.MappingProxyType(found)
