"""Template expressions of pipeline values (``{{ context.pr_number }}``): checked, then rendered.

A pipeline's values may hold ``{{ expression }}``\\ s resolved when the stage runs, against four
namespaces: ``context`` (the run's context), ``trigger`` (the event that started the run),
``stages`` (completed stages' outputs) and ``branches`` (parallel branches' outputs), as in
the reference's format. The engine is Jinja2's :class:`ImmutableSandboxedEnvironment`, narrowed
until a template can only *read data*:

* an attribute or an item is a key of a mapping or an index of a list, never a Python
  attribute (``context.__class__``, ``context.items`` are undefined, and an undefined value is
  an error: :class:`~jinja2.StrictUndefined`);
* no call of anything, no ``{% %}`` statement (no loop, no assignment, no macro), no global
  but ``null``; filters and tests are a short list (:data:`FILTERS`, :data:`TESTS`);
* a template is at most :data:`~.limits.MAX_TEMPLATE_CHARS` characters nested at most
  :data:`~.limits.MAX_TEMPLATE_NESTING` deep, ``*`` and ``**`` cannot build a huge value,
  ``%`` does not format strings, and what renders is at most
  :data:`~.limits.MAX_RENDERED_CHARS` characters.

:func:`template_problem` checks a template without data (``squadron validate``);
:func:`render` resolves a value (a string, or mappings and lists of them) against the namespaces,
checking every template first. Nothing here calls ``eval``. When a whole value is one
expression, its type is kept (``"{{ context.count }}"`` gives an int), as the reference does.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from typing import Any

from jinja2 import StrictUndefined, TemplateError, TemplateSyntaxError, nodes
from jinja2.exceptions import SecurityError
from jinja2.filters import FILTERS as DEFAULT_FILTERS
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.tests import TESTS as DEFAULT_TESTS

from squadron.domain.pipelines.limits import (
    MAX_RENDERED_CHARS,
    MAX_TEMPLATE_CHARS,
    MAX_TEMPLATE_NESTING,
)
from squadron.errors import SquadronError

#: The namespaces a template reads.
NAMESPACES: tuple[str, ...] = ("context", "trigger", "stages", "branches")
#: Names a template may use besides the namespaces (``null`` as the reference spells None).
CONSTANTS: Mapping[str, Any] = {"null": None}


def _to_str(value: Any) -> str:
    """The reference's ``str`` filter: None is the empty string."""
    return "" if value is None else str(value)


#: Filters a template may use: the reference's ``str``, ``int``, ``default``, and a few that only
#: reshape the data they are given.
FILTERS: Mapping[str, Any] = {
    "str": _to_str,
    **{
        name: DEFAULT_FILTERS[name]
        for name in ("int", "float", "default", "lower", "upper", "trim", "length", "join")
    },
}
#: Tests a template may use (``{{ context.pr is defined }}``).
TESTS: Mapping[str, Any] = {
    name: DEFAULT_TESTS[name]
    for name in (
        "defined",
        "undefined",
        "none",
        "boolean",
        "number",
        "integer",
        "float",
        "string",
        "mapping",
        "sequence",
        "true",
        "false",
    )
}

_MARKERS = ("{{", "{%", "{#")
_SINGLE = re.compile(r"\s*\{\{(?P<expr>.*)\}\}\s*", re.DOTALL)
#: The largest power a template may compute (``2 ** 64``), and the largest integer it may build.
_MAX_EXPONENT = 64
_MAX_INT_BITS = 4096


class PipelineTemplateError(SquadronError):
    """A template was refused, or could not be evaluated against the data it was given."""

    def __init__(self, template: str, reason: str) -> None:
        self.template = template
        self.reason = reason
        shown = template if len(template) <= 80 else template[:79] + "…"
        super().__init__(f"template {shown!r}: {reason}")


def is_template(value: str) -> bool:
    """Whether ``value`` holds template syntax (and is therefore checked and rendered)."""
    return any(marker in value for marker in _MARKERS)


class _DataSandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox, narrowed to reading data: see the module's docstring."""

    intercepted_binops = frozenset({"*", "**", "%"})

    def getattr(self, obj: Any, attribute: str) -> Any:
        return self.getitem(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        if isinstance(argument, str) and argument.startswith("_"):
            return self.undefined(obj=obj, name=argument)
        if isinstance(obj, Mapping):
            try:
                if argument in obj:
                    return obj[argument]
            except TypeError:  # an unhashable key
                pass
        elif (
            isinstance(obj, list | tuple | str)
            and isinstance(argument, int | slice)
            and not isinstance(argument, bool)
        ):
            try:
                return obj[argument]
            except IndexError:
                pass
        return self.undefined(obj=obj, name=argument)

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        raise SecurityError("a template calls nothing")

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "%" and isinstance(left, str):
            raise SecurityError("'%' does not format strings in a template; join with '~'")
        if operator == "**" and not (
            _is_number(left) and _is_number(right) and abs(right) <= _MAX_EXPONENT and abs(left) <= 2**64
        ):
            raise SecurityError(f"'**' takes numbers, with an exponent of at most {_MAX_EXPONENT}")
        if operator == "*":
            for sequence, times in ((left, right), (right, left)):
                sized = isinstance(sequence, str | list | tuple) and isinstance(times, int)
                if sized and len(sequence) * max(times, 0) > MAX_RENDERED_CHARS:
                    raise SecurityError(
                        f"'*' would build a value over {MAX_RENDERED_CHARS} long (MAX_RENDERED_CHARS)"
                    )
        result = super().call_binop(context, operator, left, right)
        if isinstance(result, int) and result.bit_length() > _MAX_INT_BITS:
            raise SecurityError(f"a number over {_MAX_INT_BITS} bits")
        return result


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _finalize(value: Any) -> Any:
    return "" if value is None else value


_ENV = _DataSandbox(undefined=StrictUndefined, autoescape=False, finalize=_finalize)
_ENV.globals.clear()
_ENV.globals.update(CONSTANTS)
_ENV.filters.clear()
_ENV.filters.update(FILTERS)
_ENV.tests.clear()
_ENV.tests.update(TESTS)


def _walk(node: nodes.Node) -> Iterator[tuple[nodes.Node, int]]:
    """Every node below ``node`` with its depth, iteratively (a deep tree is no recursion)."""
    stack = [(node, 0)]
    while stack:
        current, depth = stack.pop()
        yield current, depth
        stack.extend(reversed([(child, depth + 1) for child in current.iter_child_nodes()]))  # in order


def _bracket_depth(text: str) -> int:
    depth = deepest = 0
    for char in text:
        if char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}":
            depth = max(depth - 1, 0)
    return deepest


def _node_problem(node: nodes.Node, depth: int) -> str | None:
    if depth > MAX_TEMPLATE_NESTING + 2:  # Template and Output hold every expression
        return f"nested more than {MAX_TEMPLATE_NESTING} levels deep (MAX_TEMPLATE_NESTING)"
    if isinstance(node, nodes.Stmt) and not isinstance(node, nodes.Output):
        return "{% %} statements are not supported: a value holds {{ expression }}s only"
    if isinstance(node, nodes.Call):
        return "a template calls nothing: use a filter (value | default('x'))"
    if isinstance(node, nodes.Getattr) and node.attr.startswith("_"):
        return f"{node.attr!r} is not readable: a template reads data, not Python attributes"
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
        key = node.arg.value
        if isinstance(key, str) and key.startswith("_"):
            return f"{key!r} is not readable: a template reads data, not Python attributes"
    if isinstance(node, nodes.Filter) and node.name not in FILTERS:
        return f"unknown filter {node.name!r} (the filters are {', '.join(sorted(FILTERS))})"
    if isinstance(node, nodes.Test) and node.name not in TESTS:
        return f"unknown test {node.name!r} (the tests are {', '.join(sorted(TESTS))})"
    if isinstance(node, nodes.Name) and node.ctx == "load" and node.name not in (*NAMESPACES, *CONSTANTS):
        return f"unknown name {node.name!r}: a template reads {', '.join(NAMESPACES)} (and null)"
    return None


@functools.lru_cache(maxsize=4096)
def template_problem(text: str) -> str | None:
    """Why the template ``text`` is refused, or None if it is one (or holds no template at all).

    Checks without data what can be checked: size, nesting, syntax, names, filters and tests,
    no statement, no call, no private attribute. What depends on data (an undefined key, ``int``
    of a word) is an error of :func:`render`.
    """
    if not is_template(text):
        return None
    if len(text) > MAX_TEMPLATE_CHARS:
        return f"is {len(text)} characters, over the limit of {MAX_TEMPLATE_CHARS} for a template (MAX_TEMPLATE_CHARS)"
    if _bracket_depth(text) > MAX_TEMPLATE_NESTING + 2:  # "{{" is two of them
        return f"nested more than {MAX_TEMPLATE_NESTING} levels deep (MAX_TEMPLATE_NESTING)"
    try:
        tree = _ENV.parse(text)
    except TemplateSyntaxError as exc:
        return f"does not parse: {exc.message}"
    except RecursionError:
        return f"nested more than {MAX_TEMPLATE_NESTING} levels deep (MAX_TEMPLATE_NESTING)"
    for node, depth in _walk(tree):
        problem = _node_problem(node, depth)
        if problem is not None:
            return problem
    return None  # bounded in size and depth, it compiles (render does, once it runs)


def render(value: Any, namespaces: Mapping[str, Any]) -> Any:
    """``value`` with every template resolved against ``namespaces`` (mappings and lists walked).

    A string that is one ``{{ expression }}`` alone gives the expression's value, of its type;
    any other string with templates gives a string. Raises :class:`PipelineTemplateError` when a
    template is refused (:func:`template_problem`), reads what is not there, or renders more
    than :data:`~.limits.MAX_RENDERED_CHARS` characters.
    """
    unknown = sorted(set(namespaces) - set(NAMESPACES))
    if unknown:
        raise ValueError(f"unknown namespaces {unknown}: templates read {', '.join(NAMESPACES)}")
    data = {name: namespaces.get(name, {}) for name in NAMESPACES}
    return _render(value, data)


def _render(value: Any, data: dict[str, Any]) -> Any:
    if isinstance(value, str):
        return _render_string(value, data)
    if isinstance(value, Mapping):
        return {key: _render(item, data) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_render(item, data) for item in value]
    return value


def _render_string(text: str, data: dict[str, Any]) -> Any:
    if not is_template(text):
        return text
    problem = template_problem(text)
    if problem is not None:
        raise PipelineTemplateError(text, problem)
    single = _single_expression(text)
    try:
        if single is not None:
            result = _ENV.compile_expression(single, undefined_to_none=False)(**data)
            if isinstance(result, StrictUndefined):
                str(result)  # raises the undefined error
        else:
            result = _ENV.from_string(text).render(**data)
    except TemplateError as exc:
        raise PipelineTemplateError(text, exc.message or type(exc).__name__) from exc
    except (ArithmeticError, TypeError, ValueError) as exc:
        raise PipelineTemplateError(text, f"cannot be evaluated: {exc}") from exc
    if isinstance(result, str) and len(result) > MAX_RENDERED_CHARS:
        raise PipelineTemplateError(
            text,
            f"renders {len(result)} characters, over the limit of {MAX_RENDERED_CHARS} (MAX_RENDERED_CHARS)",
        )
    return result


def _single_expression(text: str) -> str | None:
    """The expression of a value that is one ``{{ expression }}`` alone (blanks around it aside)."""
    match = _SINGLE.fullmatch(text)
    if match is None:
        return None
    expr = match.group("expr")
    if any(marker in expr for marker in (*_MARKERS, "}}", "%}", "#}")):
        return None
    return expr
