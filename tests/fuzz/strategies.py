"""Hypothesis strategies for what a hostile repository or sender writes.

Each strategy mixes three sources: a small grammar of the format (so the parser gets
past its first line), the shapes known to hurt parsers (alias bombs, deep nesting,
huge numbers, lone surrogates, duplicate keys, unknown tags, backtracking globs), and
random damage (bytes spliced anywhere).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from tests.support.webhook_examples import load_examples

# --- YAML -------------------------------------------------------------------------------------

_KEYS = [
    "roles",
    "labels",
    "kind",
    "pm",
    "feat-dev",
    "max_issue_depth",
    "branch_naming",
    "default",
    "a",
    "<<",
    "?",
]
_SCALARS = st.one_of(
    st.sampled_from(
        [
            "dev",
            "pm",
            "7",
            "-1",
            "0x1F",
            "1e400",
            ".nan",
            "~",
            "null",
            "yes",
            "2024-01-01",
            "1:2:3",
            "'quoted'",
            '"esc\\u0000aped"',
            '"\\ud800"',
            "9" * 5000,
            "{issue_number:>99999}",
        ]
    ),
    st.text(st.characters(codec="utf-8"), max_size=30).map(json.dumps),
)
_TAGS = st.sampled_from(
    [
        "",
        "",
        "",
        "!!python/object:os.system ",
        "!!python/name:sys.exit ",
        "!!binary ",
        "!custom ",
        "!!set ",
        "!!str ",
    ]
)


def _yaml_value() -> st.SearchStrategy[str]:
    """Flow-style YAML values with anchors (&aN), aliases (*aN) and tags."""
    anchors = st.integers(0, 5).map(lambda n: f"&a{n} ")
    aliases = st.integers(0, 5).map(lambda n: f"*a{n}")
    leaf = st.one_of(_SCALARS, aliases)

    def grow(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        items = st.lists(children, max_size=6)
        pairs = st.lists(st.tuples(st.sampled_from(_KEYS), children), max_size=6)
        return st.one_of(
            st.tuples(_TAGS, st.one_of(st.just(""), anchors), items).map(
                lambda t: f"{t[0]}{t[1]}[{', '.join(t[2])}]"
            ),
            st.tuples(_TAGS, st.one_of(st.just(""), anchors), pairs).map(
                lambda t: f"{t[0]}{t[1]}{{{', '.join(f'{k}: {v}' for k, v in t[2])}}}"
            ),
        )

    return st.recursive(leaf, grow, max_leaves=40)


def _bomb(width: int, depth: int) -> str:
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, depth)]
    return "\n".join(lines) + "\n"


_KNOWN_HOSTILE = st.one_of(
    st.builds(_bomb, st.integers(2, 12), st.integers(2, 12)),
    st.integers(10, 50_000).map(lambda n: "x: " + "[" * n + "]" * n),
    st.integers(10, 5_000).map(lambda n: "".join(f"{' ' * i}k{i}:\n" for i in range(n // 10))),
    st.integers(1, 200).map(lambda n: "a: &a [*a" + ", *a" * n + "]"),
    st.just("x: !!python/object/apply:os.system ['echo owned']\n"),
    st.integers(100, 200_000).map(lambda n: "x: '" + "y" * n + "'\n"),
    st.integers(1, 3_000).map(lambda n: "".join(f"k: {i}\n" for i in range(n))),  # duplicate keys
)


def _splice(text: str, junk: bytes, at: int) -> bytes:
    data = text.encode("utf-8", "surrogatepass")
    at = at % (len(data) + 1)
    return data[:at] + junk + data[at:]


@st.composite
def hostile_yaml(draw: st.DrawFn) -> bytes:
    """The bytes of a hostile YAML document."""
    text = draw(
        st.one_of(
            _yaml_value().map(lambda v: f"roles: {v}\n"),
            st.lists(st.tuples(st.sampled_from(_KEYS), _yaml_value()), max_size=8).map(
                lambda pairs: "".join(f"{k}: {v}\n" for k, v in pairs)
            ),
            _KNOWN_HOSTILE,
        )
    )
    if draw(st.booleans()):
        return _splice(text, draw(st.binary(max_size=8)), draw(st.integers(0, 10**6)))
    return text.encode("utf-8", "surrogatepass")


@st.composite
def agent_files(draw: st.DrawFn) -> bytes:
    """An agent definition: front matter (often hostile) and a body with placeholders."""
    front = draw(hostile_yaml()).decode("utf-8", "replace")
    body = draw(
        st.lists(
            st.sampled_from(
                ["Work on {issue_number}.", "{{literal}}", "{", "}", "{x:>9999}", "{role!r}", "text\n"]
            ),
            max_size=10,
        )
    )
    fence = draw(st.sampled_from(["---\n", "---\r\n", "", "--- \n"]))
    closing = draw(st.sampled_from(["---\n", "...\n", ""]))
    return f"{fence}name: pm\ndescription: d\n{front}\n{closing}{''.join(body)}".encode(
        "utf-8", "surrogatepass"
    )


# --- globs ------------------------------------------------------------------------------------

GLOB_ALPHABET = "ab/*?[]!-^\\.\n\u00e9\U0001f600"
globs = st.one_of(
    st.text(st.sampled_from(list(GLOB_ALPHABET)), max_size=60),
    st.integers(1, 128).map(lambda n: "*a" * n + "b"),
    st.integers(1, 85).map(lambda n: "**/" * n + "x"),
    st.integers(1, 250).map(lambda n: "?" * n + "*"),
)
paths = st.one_of(
    st.text(st.sampled_from(list("ab/.-\n\u00e9")), max_size=80),
    st.integers(1, 20_000).map(lambda n: "a" * n),
    st.integers(1, 5_000).map(lambda n: "a/" * n),
)


# --- webhook JSON -----------------------------------------------------------------------------

_JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_values = st.recursive(
    _JSON_LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
_RAW_HOSTILE = st.one_of(
    st.integers(100, 200_000).map(lambda n: '{"a": ' + "[" * n + "]" * n + "}"),
    st.integers(21, 6_000).map(lambda n: '{"repository": {"id": ' + "9" * n + "}}"),
    st.sampled_from(['"\\ud800"', '"\\udc00x"', '"\\ud83d\\ude00"', "NaN", "-Infinity", '"\\\\ud800"']).map(
        lambda s: '{"action": "opened", "zen": ' + s + "}"
    ),
    st.just('{"action": "opened", "action": "deleted"}'),
)


def _replace(payload: Any, path: list[int], value: Any) -> Any:
    """``payload`` with the subtree at ``path`` (indexes into keys/items, modulo) replaced."""
    if not path or not isinstance(payload, dict | list) or not payload:
        return value
    if isinstance(payload, dict):
        key = sorted(payload)[path[0] % len(payload)]
        return {**payload, key: _replace(payload[key], path[1:], value)}
    index = path[0] % len(payload)
    return [*payload[:index], _replace(payload[index], path[1:], value), *payload[index + 1 :]]


@st.composite
def webhook_bodies(draw: st.DrawFn) -> tuple[str, bytes]:
    """(X-GitHub-Event, body): a real example with a subtree replaced, raw hostile JSON, or damage."""
    examples = load_examples()
    chosen = examples[draw(st.integers(0, len(examples) - 1))]
    kind = draw(st.integers(0, 3))
    if kind == 0:
        payload = chosen.payload
        for _ in range(draw(st.integers(1, 4))):
            payload = _replace(payload, draw(st.lists(st.integers(0, 50), max_size=5)), draw(json_values))
        body = json.dumps(payload, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
    elif kind == 1:
        body = draw(_RAW_HOSTILE).encode()
    elif kind == 2:
        body = _splice(
            json.dumps(chosen.payload), draw(st.binary(min_size=1, max_size=8)), draw(st.integers(0, 10**6))
        )
    else:
        body = json.dumps(draw(json_values)).encode("utf-8", "surrogatepass")
    return chosen.event, body
