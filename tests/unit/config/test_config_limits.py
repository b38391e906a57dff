"""A hostile repository's .squadron/: every attack is a precise ConfigError, fast and in bounded memory.

Each case is parsed twice — from a directory, as ``squadron validate`` reads it, and
from the default branch through the RepositoryFiles port, as the router reads it —
in a forked child under a memory ceiling (tests/support/bounded.py). Both must give
the same problems, each naming its file (and line, where there is one), within a
bounded CPU time (a guard against hangs; bench/config_validation measures the speed).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from squadron.config import ConfigError, ConfigLoader, Problem, load_directory, parse_files
from squadron.config.loader import SYMLINK_PROBLEM
from squadron.domain.repo_config.limits import (
    LIMITS,
    MAX_FILE_BYTES,
    MAX_FILES,
    MAX_FRONT_MATTER_BYTES,
    MAX_PATH_GLOBS,
    MAX_TOTAL_BYTES,
    MAX_YAML_ALIASES,
    MAX_YAML_DEPTH,
    MAX_YAML_NODES,
)
from tests.support.bounded import run_bounded
from tests.support.repo_files import Content, FakeRepositoryFiles, Link

ROOT = Path(__file__).resolve().parents[3]


def _laughs(levels: int = 9) -> str:
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        name, prev = chr(97 + i), chr(96 + i)
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    return "\n".join(lines) + "\n"


def _agent(front: str, body: str = "Work on {issue_number}.\n") -> str:
    return f"---\n{front}---\n{body}"


def _many_aliases() -> str:
    return "x: &x 1\ny: [" + ", ".join(["*x"] * (MAX_YAML_ALIASES + 1)) + "]\n"


LINE = "#" * 99 + "\n"

# (files of .squadron, the problem expected: (file, line, start of the message))
CASES: list[tuple[str, dict[str, Content], tuple[str, int | None, str]]] = [
    (
        "billion laughs in config.yaml",
        {"config.yaml": _laughs()},
        (".squadron/config.yaml", 5, f"expands to more than {MAX_YAML_NODES} values"),
    ),
    (
        "alias bomb in an agent's front matter",
        {"agents/pm.md": _agent("name: pm\ndescription: d\n" + _laughs().replace("a: &a", "x: &a"))},
        (".squadron/agents/pm.md", 8, f"expands to more than {MAX_YAML_NODES} values"),
    ),
    (
        "a document that contains itself",
        {"config.yaml": "project: &p {name: x, description: *p}\n"},
        (".squadron/config.yaml", 1, f"nested more than {MAX_YAML_DEPTH} levels deep"),
    ),
    (
        "ten thousand nested lists",
        {"config.yaml": "x: " + "[" * 10_000 + "]" * 10_000 + "\n"},
        (".squadron/config.yaml", 1, f"nested more than {MAX_YAML_DEPTH} levels deep"),
    ),
    (
        "two hundred nested mappings",
        {"config.yaml": "".join(f"{' ' * i}k:\n" for i in range(200))},
        (".squadron/config.yaml", MAX_YAML_DEPTH, f"nested more than {MAX_YAML_DEPTH} levels deep"),
    ),
    (
        "too many aliases",
        {"config.yaml": _many_aliases()},
        (".squadron/config.yaml", 2, f"more than {MAX_YAML_ALIASES} aliases"),
    ),
    (
        "too many values",
        {"config.yaml": "x: [" + ",".join(["1"] * (MAX_YAML_NODES + 1)) + "]\n"},
        (".squadron/config.yaml", 1, f"more than {MAX_YAML_NODES} values in one file"),
    ),
    (
        "a 50 MB config.yaml",
        {"config.yaml": b"a: " + b"x" * (50 * 1024 * 1024)},
        (
            ".squadron/config.yaml",
            None,
            f"is {50 * 1024 * 1024 + 3} bytes, over the limit of {MAX_FILE_BYTES}",
        ),
    ),
    (
        "files that are too large together",
        {
            f"agents/a{i}.md": LINE * (MAX_FILE_BYTES // 100)
            for i in range(MAX_TOTAL_BYTES // MAX_FILE_BYTES + 1)
        },
        (".squadron/agents/a4.md", None, "the configuration files up to this one are"),
    ),
    (
        "too many files",
        {f"agents/a{i:02}.md": "x" for i in range(MAX_FILES + 1)},
        (".squadron", None, f"{MAX_FILES + 1} configuration files, over the limit of {MAX_FILES}"),
    ),
    (
        "Latin-1 bytes",
        {"config.yaml": b"project:\n  name: caf\xe9\n"},
        (".squadron/config.yaml", 2, "is not UTF-8 text: byte 0xe9 at column 12"),
    ),
    (
        "UTF-16",
        {"config.yaml": "max_issue_depth: 4\n".encode("utf-16")},
        (
            ".squadron/config.yaml",
            1,
            "is not UTF-8 text: byte 0xff at column 1 is not valid UTF-8 (it looks like UTF-16)",
        ),
    ),
    (
        "a symbolic link for config.yaml",
        {"config.yaml": Link("../../etc/passwd")},
        (".squadron/config.yaml", None, SYMLINK_PROBLEM),
    ),
    (
        "a symbolic link for agents/",
        {"agents": Link("/etc"), "config.yaml": "version: 1\n"},
        (".squadron/agents", None, SYMLINK_PROBLEM),
    ),
    (
        "a python object tag",
        {"config.yaml": "project: !!python/object/apply:os.system [echo owned]\n"},
        (".squadron/config.yaml", 1, "the tag !!python/object/apply:os.system is not allowed"),
    ),
    (
        "a python name tag on a scalar",
        {"config.yaml": "project:\n  name: !!python/name:os.system ''\n"},
        (".squadron/config.yaml", 2, "the tag !!python/name:os.system is not allowed"),
    ),
    (
        "a custom tag",
        {"config.yaml": "max_issue_depth: !env DEPTH\n"},
        (".squadron/config.yaml", 1, "the tag !env is not allowed"),
    ),
    (
        "a merge key",
        {"config.yaml": "base: &b {kind: dev}\nroles:\n  x:\n    <<: *b\n"},
        (".squadron/config.yaml", 4, "YAML merge keys (<<) are not supported"),
    ),
    (
        "an integer of 5000 digits",
        {"config.yaml": "max_issue_depth: " + "9" * 5000 + "\n"},
        (".squadron/config.yaml", 1, "an integer of 5000 characters is too long"),
    ),
    (
        "a front matter that never ends",
        {"agents/pm.md": "---\nname: pm\n" + "description: x\n" * 2000},
        (".squadron/agents/pm.md", 2, f"the front matter is over {MAX_FRONT_MATTER_BYTES} bytes"),
    ),
    (
        "a gigabyte branch name",
        {"config.yaml": "branch_naming:\n  default: 'b/{issue_number:>999999999}'\n"},
        (".squadron/config.yaml", 2, "placeholders take no format spec"),
    ),
    (
        "a gigabyte prompt",
        {"agents/pm.md": _agent("name: pm\ndescription: d\n", "Hi {project_name:>999999999}\n")},
        (".squadron/agents/pm.md", 5, "placeholders take no format spec"),
    ),
    (
        "a placeholder twice in a branch template",
        {"config.yaml": "branch_naming:\n  default: '{role}{role}{role}{role}/{issue_number}'\n"},
        (".squadron/config.yaml", 2, "{role} may appear only once"),
    ),
    (
        "a glob too long",
        {
            "workflows/approval-flows.yaml": "default:\n  protected_paths:\n    - paths: ['"
            + "*a" * 200
            + "b']\n      require_human: true\n"
        },
        (".squadron/workflows/approval-flows.yaml", 3, "a path glob is at most 256 characters"),
    ),
    (
        "too many globs",
        {
            "workflows/approval-flows.yaml": "default:\n  protected_paths:\n"
            + "".join(
                f"    - {{paths: ['d{i}/**'], require_human: true}}\n" for i in range(MAX_PATH_GLOBS + 1)
            )
        },
        (".squadron/workflows/approval-flows.yaml", 1, f"{MAX_PATH_GLOBS + 1} path globs in protected_paths"),
    ),
]


def _write(directory: Path, files: dict[str, Content]) -> None:
    directory.mkdir()
    for rel, content in files.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Link):
            os.symlink(content.target, path)
        else:
            path.write_bytes(content.encode() if isinstance(content, str) else content)


def _problems(load: Callable[[], object]) -> list[Problem]:
    try:
        load()
    except ConfigError as exc:
        return list(exc.problems)
    raise AssertionError("the configuration was accepted")


def _from_directory(directory: Path) -> list[Problem]:
    return _problems(lambda: load_directory(directory, root=".squadron"))


def _from_default_branch(files: dict[str, Content]) -> list[Problem]:
    repository = FakeRepositoryFiles()
    repository.commit("octo/app", "sha1", files)
    return _problems(lambda: ConfigLoader(repository).load("octo/app"))


@pytest.mark.parametrize(("files", "expected"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_hostile_configuration_is_refused_precisely_fast_and_in_bounded_memory(
    files: dict[str, Content], expected: tuple[str, int | None, str], tmp_path: Path
) -> None:
    directory = tmp_path / ".squadron"
    _write(directory, files)

    on_disk = run_bounded(_from_directory, directory, memory_mib=256)
    on_github = run_bounded(_from_default_branch, files, memory_mib=256)

    for outcome in (on_disk, on_github):
        assert outcome.how == "returned", outcome.value
        # A bound against hangs and super-linear blow-ups, not a speed claim (measured around a
        # second on the test machines; bench/config_validation records how fast it is).
        assert outcome.cpu_seconds < 20.0, outcome
    assert on_disk.value == on_github.value  # squadron validate and the router say the same
    file, line, message = expected
    assert any((p.file, p.line) == (file, line) and p.message.startswith(message) for p in on_disk.value), (
        on_disk.value
    )


def test_a_symlinked_squadron_directory_is_refused_alike(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "config.yaml").write_text("max_issue_depth: 9\n")
    os.symlink(tmp_path / "elsewhere", tmp_path / ".squadron")
    repository = FakeRepositoryFiles()
    repository.commit("octo/app", "sha1", {"": Link("elsewhere")})

    on_disk = _from_directory(tmp_path / ".squadron")
    on_github = _problems(lambda: ConfigLoader(repository).load("octo/app"))

    assert on_disk == on_github == [Problem(".squadron", None, "", SYMLINK_PROBLEM)]


def test_a_utf8_byte_order_mark_is_accepted() -> None:
    repository = FakeRepositoryFiles()
    repository.commit("octo/app", "sha1", {"config.yaml": b"\xef\xbb\xbfmax_issue_depth: 4\n"})
    assert ConfigLoader(repository).load("octo/app").config.max_issue_depth == 4


def test_a_file_at_the_limit_is_read() -> None:
    text = "max_issue_depth: 4\n" + LINE * ((MAX_FILE_BYTES - 19) // 100)
    assert len(text.encode()) <= MAX_FILE_BYTES
    assert parse_files({"config.yaml": text}).config.max_issue_depth == 4


def test_aliases_within_the_limits_still_work() -> None:
    text = (
        "human_groups:\n  leads: {members: &leads [alice, bob]}\n"
        "escalation:\n  notify: [human_group:leads]\n  assign: *leads\n"
    )
    assert parse_files({"config.yaml": text}).config.escalation.assign == ["alice", "bob"]


def test_a_parser_bug_pauses_one_repository_instead_of_raising(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the parser raises becomes a ConfigError (cached per commit): never a crash."""
    from squadron.config import loader  # noqa: PLC0415

    def broken(*args: object, **kwargs: object) -> object:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(loader, "parse_files", broken)
    repository = FakeRepositoryFiles()
    repository.commit("octo/app", "sha1", {"config.yaml": "version: 1\n"})
    problems = _problems(lambda: ConfigLoader(repository).load("octo/app"))
    assert problems == [
        Problem(
            ".squadron", None, "", "could not be parsed (RecursionError: maximum recursion depth exceeded)"
        )
    ]


def test_the_docs_document_every_limit() -> None:
    page = (ROOT / "docs" / "repository-configuration.md").read_text(encoding="utf-8")
    for name, value in LIMITS.items():
        assert f"`{name}`" in page, name
        assert f"| `{name}` | {value:,}" in page, (name, value)
