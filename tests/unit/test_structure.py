"""The package's shape (issue 29): no module over 600 lines, no private name imported across modules.

Each rule is a pure function over a tree of sources, tried first on small hostile trees (so the
check itself is known to catch what it must) and then on the package as it is. The allowlists
only shrink: an entry whose module no longer breaks the rule fails the test until it is removed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "layers" / "squadron" / "squadron"
#: Outside the package, the sources that import from it (Lambda handlers, the CDK app, the tests
#: and their support, the benchmarks): they too reach only public names of the package and of
#: each other (a test takes what it needs through the public seam, or the name is made public).
OTHER_SOURCES = (ROOT / "functions", ROOT / "infra", ROOT / "tests", ROOT / "bench")

#: The most lines a module of the package may have.
MAX_LINES = 600

#: Modules allowed over :data:`MAX_LINES` while a split is under way (the test fails on an entry
#: that is under the limit, so an entry leaves with its split): none.
OVER_THE_LIMIT: frozenset[str] = frozenset()

#: ``(importing module, imported name)`` of private names still imported across modules: none.
PRIVATE_IMPORTS_ALLOWED: frozenset[tuple[str, str]] = frozenset()


def lines_over(root: Path, limit: int) -> dict[str, int]:
    """The modules under ``root`` (paths relative to it) with more than ``limit`` lines."""
    counts = {
        path.relative_to(root).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(root.rglob("*.py"))
    }
    return {name: count for name, count in counts.items() if count > limit}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_name(path: Path, root: Path) -> str:
    """``path``'s dotted module name, ``root`` being the directory its top package is in."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _absolute(module: str | None, level: int, package: str) -> str:
    """The absolute name of a ``from`` import's module (``level`` dots relative to ``package``)."""
    if not level:
        return module or ""
    base = package.split(".")
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _is_module(search: tuple[Path, ...], dotted: str) -> bool:
    """Whether ``dotted`` names a module or package in ``search`` (not a class or function)."""
    for root in search:
        base = root.joinpath(*dotted.split("."))
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            return True
    return False


def private_imports(
    paths: Iterable[Path], *, root: Path, packages: tuple[str, ...], search: tuple[Path, ...]
) -> Iterator[tuple[str, str]]:
    """``(importing module, name)`` for every private name a module in ``paths`` (named from
    ``root``) takes from another module of ``packages`` (found in ``search``): ``from m import
    _x`` (absolute or relative, at any depth of the code, under ``TYPE_CHECKING`` too) and
    ``m._x`` where ``m`` was bound to a module by an import (``import p.m as m``, ``from p
    import m``, ``import p.m`` then ``p.m._x``). A package's private submodules are its own."""

    def ours(module: str) -> bool:
        return any(module == p or module.startswith(f"{p}.") for p in packages)

    for path in sorted(paths):
        importer = _module_name(path, root)
        package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        modules: dict[str, str] = {}  # a name bound by an import -> the module it may be
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _absolute(node.module, node.level, package)
                if not ours(source) or source == importer:
                    continue
                for alias in node.names:
                    own_submodule = source == package and _is_module(search, f"{source}.{alias.name}")
                    if _private(alias.name) and not own_submodule:
                        yield importer, alias.name
                    else:
                        modules[alias.asname or alias.name] = f"{source}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if ours(alias.name):
                        bound = alias.asname or alias.name.split(".")[0]
                        modules[bound] = alias.name if alias.asname else bound
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            chain: list[str] = []
            value: ast.expr = node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in modules:
                owner = ".".join([modules[value.id], *reversed(chain)])
                if owner != importer and _is_module(search, owner):
                    yield importer, node.attr


# --- the checks, on hostile trees -----------------------------------------------------------


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    ("files", "over"),
    [
        ({"pkg/a.py": "x = 1\n" * 600}, {}),
        ({"pkg/a.py": "x = 1\n" * 601}, {"pkg/a.py": 601}),
        ({"pkg/sub/deep.py": "\n" * 700, "pkg/ok.py": "y = 2\n"}, {"pkg/sub/deep.py": 700}),
        ({"pkg/a.py": "x = 1\n" * 600 + "x = 2"}, {"pkg/a.py": 601}),  # no final newline
    ],
    ids=["at-the-limit", "one-over", "nested-and-blank", "no-final-newline"],
)
def test_lines_over_counts_every_line_of_every_module(
    tmp_path: Path, files: dict[str, str], over: dict[str, int]
) -> None:
    assert lines_over(_tree(tmp_path, files), MAX_LINES) == over


_HOME = "def _helper():\n    pass\n\n\nclass _Base:\n    pass\n\n\ndef public():\n    pass\n"


@pytest.mark.parametrize(
    ("importer", "found"),
    [
        ("from pkg.home import public\n", []),
        ("from pkg.home import _helper\n", [("pkg.user", "_helper")]),
        ("from pkg.home import public, _Base as Base\n", [("pkg.user", "_Base")]),
        ("from .home import _helper\n", [("pkg.user", "_helper")]),
        (
            "def f():\n    from pkg.home import _helper  # noqa\n    return _helper\n",
            [("pkg.user", "_helper")],
        ),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.home import _Base\n",
            [("pkg.user", "_Base")],
        ),
        ("import pkg.home as h\nh._helper()\n", [("pkg.user", "_helper")]),
        ("from pkg import home\nhome._helper()\n", [("pkg.user", "_helper")]),
        ("import pkg.home\npkg.home._helper()\n", [("pkg.user", "_helper")]),
        # A private attribute of a class or an object is not a module's private name.
        ("from pkg.home import public\npublic._cache = 1\n", []),
        ("class C:\n    def f(self):\n        return self._x\n", []),
        # Dunders are public; other packages' private names are not this rule's business.
        ("from pkg import __name__ as n\n", []),
        ("from os import _exit\n", []),
    ],
    ids=[
        "public",
        "private-function",
        "private-class-renamed",
        "relative",
        "function-local",
        "type-checking",
        "module-alias",
        "module-from-package",
        "dotted-module",
        "attribute-of-a-function",
        "own-attribute",
        "dunder",
        "other-package",
    ],
)
def test_private_imports_finds_every_way_to_reach_another_modules_private_name(
    tmp_path: Path, importer: str, found: list[tuple[str, str]]
) -> None:
    root = _tree(tmp_path, {"pkg/__init__.py": "", "pkg/home.py": _HOME, "pkg/user.py": importer})
    assert list(_found_in(root)) == found


def _found_in(root: Path) -> Iterator[tuple[str, str]]:
    return private_imports(root.rglob("*.py"), root=root, packages=("pkg",), search=(root,))


@pytest.mark.parametrize(
    ("files", "found"),
    [
        ({"pkg/__init__.py": "from pkg import _inner\n", "pkg/_inner.py": _HOME + "_helper()\n"}, []),
        ({"pkg/__init__.py": "", "pkg/_inner.py": "", "pkg/user.py": "from pkg import _inner\n"}, []),
        (
            {
                "pkg/__init__.py": "",
                "pkg/sub/__init__.py": "",
                "pkg/sub/_inner.py": "",
                "pkg/user.py": "from pkg.sub import _inner\n",
            },
            [("pkg.user", "_inner")],
        ),
        (
            {"pkg/__init__.py": "", "pkg/sub/__init__.py": "from . import _inner\n", "pkg/sub/_inner.py": ""},
            [],
        ),
        ({"pkg/__init__.py": "", "pkg/sub/__init__.py": "from .. import _x\n"}, [("pkg.sub", "_x")]),
    ],
    ids=["package-init", "sibling", "another-packages", "relative-own", "relative-parent"],
)
def test_a_package_reaches_its_own_private_modules_and_nothing_else_private(
    tmp_path: Path, files: dict[str, str], found: list[tuple[str, str]]
) -> None:
    assert list(_found_in(_tree(tmp_path, files))) == found


# --- the package as it is ---------------------------------------------------------------------


def test_no_module_of_the_package_is_over_600_lines() -> None:
    over = lines_over(PACKAGE, MAX_LINES)
    assert {name: n for name, n in over.items() if name not in OVER_THE_LIMIT} == {}, (
        f"split these modules into cohesive ones of at most {MAX_LINES} lines"
    )


@pytest.mark.parametrize("module", sorted(OVER_THE_LIMIT))
def test_each_module_allowed_over_the_limit_is_still_over_it(module: str) -> None:
    over = lines_over(PACKAGE, MAX_LINES)
    assert module in over, f"{module} is split (or gone): remove it from OVER_THE_LIMIT"


def test_no_module_imports_a_private_name_of_another() -> None:
    found = set(
        private_imports(
            PACKAGE.rglob("*.py"), root=PACKAGE.parent, packages=("squadron",), search=(PACKAGE.parent,)
        )
    )
    found |= set(
        private_imports(
            (
                path
                for source in OTHER_SOURCES
                for path in source.rglob("*.py")
                if not any(part.startswith(".") for part in path.relative_to(ROOT).parts)
            ),
            root=ROOT,
            packages=("squadron", "functions", "infra", "tests", "bench"),
            search=(PACKAGE.parent, ROOT),
        )
    )
    assert found - PRIVATE_IMPORTS_ALLOWED == set(), (
        "make each name public in its home module (and rename it where it is used), or move it"
    )
    assert PRIVATE_IMPORTS_ALLOWED - found == set(), "remove the fixed entries from PRIVATE_IMPORTS_ALLOWED"
