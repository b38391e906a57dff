"""Pipeline templates (issue 30, item 1): the reference's expressions render, with its type
preservation; a hostile template is refused with a clear reason before anything of it runs, and
what it tried to reach (a Python object, a huge value, a long loop) is never what comes back."""

from __future__ import annotations

from typing import Any

import pytest

from squadron.domain.pipelines.limits import MAX_RENDERED_CHARS, MAX_TEMPLATE_CHARS, MAX_TEMPLATE_NESTING
from squadron.domain.pipelines.templates import PipelineTemplateError, render, template_problem

DATA: dict[str, Any] = {
    "context": {
        "pr_number": 42,
        "issue_number": 7,
        "environment": "production",
        "name": None,
        "prs": [101, 102],
        "labels": ["bug", "security"],
        "count": "3",
        "big": "x" * 40_000,
    },
    "trigger": {"pull_request": {"number": 42, "base": {"ref": "main"}}},
    "stages": {"review": {"outputs": {"verdict": "approve"}}},
    "branches": {"security-review": {"status": "passed"}},
}

# (template, what it renders to) — the reference's documented forms first.
RENDERS: list[tuple[Any, Any]] = [
    ("Fix bug #{{ context.issue_number }}", "Fix bug #7"),
    ("https://api.example.com/pr/{{ context.pr_number }}", "https://api.example.com/pr/42"),
    ("{{ context.pr_number }}", 42),  # the whole value: its type is kept
    ("  {{ context.prs }}  ", [101, 102]),
    ("{{ context.pr_number | str }}", "42"),
    ("{{ context.count | int }}", 3),
    ("{{ context.missing | default('unknown') }}", "unknown"),
    ("{{ context.pr_number != null }}", True),
    ("{{ context.environment == 'production' }}", True),
    ("{{ trigger.pull_request.base.ref }}", "main"),
    ("{{ context.prs[0] }}", 101),
    ("{{ stages.review.outputs.verdict }}", "approve"),
    ("{{ branches['security-review'].status }}", "passed"),
    ("name: {{ context.name }}.", "name: ."),  # None is empty in a mixed string, as the reference
    ("{{ context.name | str }}", ""),
    ("{{ 'security' in context.labels }}", True),
    ("{{ context.labels | join(', ') }}", "bug, security"),
    ("{{ context.pr_number * 2 }}", 84),
    ("{{ context.pr_number is defined }}", True),
    ("no template here", "no template here"),
    (
        {"pipeline": "{{ context.pr_number }}", "list": ["#{{ context.issue_number }}", 5]},
        {"pipeline": 42, "list": ["#7", 5]},
    ),
    (17, 17),
]


@pytest.mark.parametrize(("template", "expected"), RENDERS, ids=[repr(t)[:60] for t, _ in RENDERS])
def test_templates_render_as_the_reference_documents(template: Any, expected: Any) -> None:
    assert render(template, DATA) == expected


# (hostile template, the start of the reason it is refused) — refused by the check, without data.
REFUSED: list[tuple[str, str]] = [
    ("{{ context.__class__ }}", "'__class__' is not readable: a template reads data, not Python attributes"),
    ("{{ context['__globals__'] }}", "'__globals__' is not readable"),
    ("{{ context.pr_number.__class__.__mro__[1].__subclasses__() }}", "a template calls nothing"),
    ("{{ context.items() }}", "a template calls nothing"),
    ("{{ range(10**9) | length }}", "a template calls nothing"),
    ("{{ lipsum }}", "unknown name 'lipsum'"),
    ("{{ cycler.__init__.__globals__ }}", "'__globals__' is not readable"),
    ("{{ self }}", "unknown name 'self'"),
    ("{{ config }}", "unknown name 'config'"),
    ("{% for i in range(10000000) %}x{% endfor %}", "{% %} statements are not supported"),
    ("{% set x = 1 %}{{ x }}", "{% %} statements are not supported"),
    ("{% macro m() %}{% endmacro %}", "{% %} statements are not supported"),
    ("{% include '/etc/passwd' %}", "{% %} statements are not supported"),
    ("{{ context.pr_number | attr('__class__') }}", "unknown filter 'attr'"),
    ("{{ '%s' | format(1) }}", "unknown filter 'format'"),
    ("{{ context.pr_number is callable }}", "unknown test 'callable'"),
    (
        "{{ " + "(" * (MAX_TEMPLATE_NESTING + 5) + "1" + ")" * (MAX_TEMPLATE_NESTING + 5) + " }}",
        "nested more than",
    ),
    ("{{ " + "not " * 400 + "1 }}", "nested more than"),
    ("{{ " + "-" * 1900 + "1 }}", "nested more than"),
    ("{{ " + "+".join(["stages"] * 200) + " }}", "nested more than"),
    (
        "{{ context.x }}" + "y" * MAX_TEMPLATE_CHARS,
        f"is {MAX_TEMPLATE_CHARS + 15} characters, over the limit",
    ),
    ("{{ context.pr_number", "does not parse"),
    ("{{ }}", "does not parse"),
]


@pytest.mark.parametrize(("template", "reason"), REFUSED, ids=[t[:50] for t, _ in REFUSED])
def test_hostile_templates_are_refused_before_they_run(template: str, reason: str) -> None:
    problem = template_problem(template)
    with pytest.raises(PipelineTemplateError) as caught:
        render(template, DATA)

    assert problem is not None and problem.startswith(reason)
    assert caught.value.reason == problem


# (hostile template that parses, the start of the reason it fails) — stopped while it runs,
# before it builds the value it asks for.
STOPPED: list[tuple[str, str]] = [
    ("{{ 'a' * 1000000000 }}", f"'*' would build a value over {MAX_RENDERED_CHARS} long"),
    ("{{ [0] * 100000000 }}", "'*' would build a value over"),
    ("{{ context.big * 2 }}", "'*' would build a value over"),
    ("{{ 10 ** 100000 }}", "'**' takes numbers, with an exponent of at most 64"),
    ("{{ 2 ** 64 ** 64 }}", "a number over 4096 bits"),
    ("{{ '%999999999d' % 1 }}", "'%' does not format strings"),
    ("{{ context.big ~ context.big }}", f"renders 80000 characters, over the limit of {MAX_RENDERED_CHARS}"),
    ("{{ context.missing }}", "'dict object' has no attribute 'missing'"),
    ("{{ context.items }}", "'dict object' has no attribute 'items'"),
    ("{{ context.environment.upper }}", "'str object' has no attribute 'upper'"),
    ("{{ context.prs[9] }}", "list object has no element 9"),
    ("{{ 1 / 0 }}", "cannot be evaluated: division by zero"),
]


@pytest.mark.parametrize(("template", "reason"), STOPPED, ids=[t[:50] for t, _ in STOPPED])
def test_what_a_template_asks_beyond_its_data_fails_cleanly(template: str, reason: str) -> None:
    with pytest.raises(PipelineTemplateError) as caught:
        render(template, DATA)

    assert caught.value.reason.startswith(reason), caught.value.reason


def test_an_unknown_namespace_is_a_caller_error() -> None:
    with pytest.raises(ValueError, match="unknown namespaces"):
        render("{{ github.pr }}", {"github": {}})


def test_a_refused_template_in_a_nested_value_is_refused_whole() -> None:
    with pytest.raises(PipelineTemplateError):
        render({"ok": "{{ context.pr_number }}", "bad": ["{{ context.__class__ }}"]}, DATA)
