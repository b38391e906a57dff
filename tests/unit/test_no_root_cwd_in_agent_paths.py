"""The host never starts a process in an agent's directory: a fast guard over the package's source.

Python's ``subprocess(cwd=..., user=...)`` enters ``cwd`` before it drops privileges (FINDINGS):
a root host that starts a process "as" an agent in a directory the agent can write follows the
agent's links as root. The rule (ADR 0025, docs/security.md): a process that drops to an agent's
user (``user=``/``group=``/``preexec_fn=``, or a command built by ``AgentUser.command``, which
runs ``setpriv``) starts in :data:`~squadron.adapters.confinement.TRUSTED_CWD` and its shell
enters the agent's directory after the drop; any other process the package starts in a
directory names one the host alone can write (listed below, with why); nothing ``chdir``\\ s.

The end-to-end attack (tests/e2e/test_containment_lifecycle.py) needs root and the Copilot
CLI; this reads every module of the package in well under a second, and the table of broken
copies shows it catches the pattern, in the real files and in new code.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

import squadron

PACKAGE = Path(squadron.__file__).parent

#: Calls that start a process whatever they are passed (besides any call with ``cwd=``: an
#: injected runner, ``self._run``, is one).
SPAWNERS = frozenset(
    {
        "Popen",
        "call",
        "check_call",
        "check_output",
        "create_subprocess_exec",
        "create_subprocess_shell",
        "system",
        "popen",
        "posix_spawn",
        "posix_spawnp",
        "execv",
        "execve",
        "execvp",
        "execvpe",
        "spawnv",
        "spawnve",
        "CopilotClient",
    }
)
#: ``subprocess.run`` (and only that ``run``: ``asyncio.run`` starts none).
MODULE_SPAWNERS = frozenset({("subprocess", "run")})
#: The keywords naming where a process starts: ``cwd``, and the Copilot SDK's client's
#: ``working_directory`` (where it starts the CLI).
CWD_KEYWORDS = frozenset({"cwd", "working_directory"})
#: Keywords by which subprocess drops privileges in the child, after entering ``cwd``.
DROP_KEYWORDS = frozenset({"user", "group", "extra_groups", "preexec_fn"})
#: Where a process that drops may start: the host's own directory.
TRUSTED = frozenset({"TRUSTED_CWD"})

#: (module, function) -> why the directory it starts processes in is one no agent can write.
HOST_OWNED_CWDS: dict[tuple[str, str], str] = {
    (
        "adapters/git/framework_clone.py",
        "FrameworkClone.git",
    ): "the framework's bare clone, <root>/framework/<agent id>.git: root's, 0700 at every level",
    (
        "adapters/git/framework_clone.py",
        "FrameworkClone.push",
    ): "the same framework clone, pushing with its own configuration",
    (
        "local/git_store.py",
        "GitStore.git",
    ): "the local GitHub sandbox's bare repositories (the stack's own state, no agent's directory)",
    (
        "local/git_store.py",
        "GitStore.conflicts",
    ): "the same sandbox repository, asked whether a merge conflicts",
    (
        "destroy_cli.py",
        "run_destroy",
    ): "the operator's checkout of the CDK app, on the operator's machine (no agent there)",
}


#: (module, function) -> why its ``chdir`` is no host changing its own directory: a process of its
#: own, forked to stand in for Popen's child, enters the directory Popen's child would.
CHDIR_IN_A_FORK: dict[tuple[str, str], str] = {
    ("adapters/zygote.py", "become"): (
        "the zygote's fork, a new process that becomes one launch (the local stack's only): it enters "
        "the launcher's own working directory, written by the launcher into a 0600 file only it and "
        "the fork can read (the directory a plain launch inherits, never an agent's), after taking "
        "the launch's groups and user, as Popen's child does"
    ),
}


@dataclass(frozen=True)
class Finding:
    module: str
    function: str
    line: int
    why: str

    def __str__(self) -> str:
        return f"{self.module}:{self.line} ({self.function}): {self.why}"


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


#: Calls whose ``cwd`` is entered after the drop: ``AgentUser.command`` builds the command line
#: whose shell enters it as the agent (it starts nothing itself).
AFTER_THE_DROP = frozenset({"command"})


def _is_spawn(call: ast.Call) -> bool:
    func = call.func
    if _name(func) in AFTER_THE_DROP:
        return False
    if any(k.arg == "cwd" for k in call.keywords):
        return True
    if _name(func) in SPAWNERS:
        return True
    return isinstance(func, ast.Attribute) and (_name(func.value), func.attr) in MODULE_SPAWNERS


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
    }


def _dropped_names(function: ast.AST) -> set[str]:
    """Names a function binds to a command that drops to an agent's user (``AgentUser.command``)."""
    bound: set[str] = set()
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and _name(node.value.func) == "command"
        ):
            for target in node.targets:
                bound |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return bound


def _trusted(cwd: ast.expr | None) -> bool:
    if cwd is None:
        return False
    if isinstance(cwd, ast.Constant):
        return cwd.value == "/"
    return _name(cwd) in TRUSTED


class _Scan(ast.NodeVisitor):
    def __init__(self, module: str) -> None:
        self.module = module
        self.scope: list[str] = []
        self.dropped: list[set[str]] = [set()]
        self.found: list[Finding] = []
        #: The (module, function) pairs whose start in a directory HOST_OWNED_CWDS excused.
        self.excused: set[tuple[str, str]] = set()
        #: The (module, function) pairs whose chdir CHDIR_IN_A_FORK excused.
        self.forks: set[tuple[str, str]] = set()

    def _enter(self, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scope.append(node.name)
        if not isinstance(node, ast.ClassDef):
            self.dropped.append(self.dropped[-1] | _dropped_names(node))
        self.generic_visit(node)
        if not isinstance(node, ast.ClassDef):
            self.dropped.pop()
        self.scope.pop()

    visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _enter

    def _say(self, node: ast.AST, why: str) -> None:
        function = ".".join(self.scope) or "<module>"
        self.found.append(Finding(self.module, function, getattr(node, "lineno", 0), why))

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        function = ".".join(self.scope) or "<module>"
        if isinstance(func, ast.Attribute) and func.attr in {"chdir", "fchdir"}:
            if (self.module, function) in CHDIR_IN_A_FORK:
                self.forks.add((self.module, function))
                self.generic_visit(node)
                return
            self._say(
                node, "the host changes its own directory (every process it starts after would begin there)"
            )
        elif _is_spawn(node):
            self._check_spawn(node)
        self.generic_visit(node)

    def _check_spawn(self, node: ast.Call) -> None:
        # (``working_directory`` counts only here, on a spawner: elsewhere it is a request's field.)
        cwd = next((k.value for k in node.keywords if k.arg in CWD_KEYWORDS), None)
        argument_names: set[str] = set()
        for arg in [*node.args, *(k.value for k in node.keywords if k.arg not in CWD_KEYWORDS)]:
            argument_names |= _names_in(arg)
        drops = any(k.arg in DROP_KEYWORDS for k in node.keywords) or bool(
            argument_names & (self.dropped[-1] | {"SETPRIV"})
        )
        where = ast.unparse(cwd) if cwd is not None else "the host's current directory"
        if drops and not _trusted(cwd):
            self._say(node, f"drops to an agent's user after entering {where} as root: start in TRUSTED_CWD")
            return
        function = ".".join(self.scope) or "<module>"
        if cwd is None or _trusted(cwd):
            return
        if (self.module, function) in HOST_OWNED_CWDS:
            self.excused.add((self.module, function))
        else:
            self._say(
                node,
                f"starts a process in {where}: start in TRUSTED_CWD, or list it in HOST_OWNED_CWDS "
                "with why no agent can write there",
            )


def _scan(source: str, module: str) -> _Scan:
    scan = _Scan(module)
    scan.visit(ast.parse(source))
    return scan


def findings(source: str, module: str) -> list[Finding]:
    return _scan(source, module).found


def _modules() -> list[tuple[str, str]]:
    return [
        (str(path.relative_to(PACKAGE)), path.read_text())
        for path in sorted(PACKAGE.rglob("*.py"))
        if "node_modules" not in path.parts
    ]


def test_no_process_of_the_package_starts_in_an_agents_directory() -> None:
    found = [f for module, source in _modules() for f in findings(source, module)]
    assert not found, "\n".join(map(str, found))


def test_every_host_owned_directory_listed_is_still_where_a_process_starts() -> None:
    """A stale entry would let a new process in that function start anywhere unnoticed."""
    excused = set().union(*(_scan(source, module).excused for module, source in _modules()))
    assert excused == set(HOST_OWNED_CWDS)
    forks = set().union(*(_scan(source, module).forks for module, source in _modules()))
    assert forks == set(CHDIR_IN_A_FORK)


@dataclass(frozen=True)
class Broken:
    case: str
    module: str
    #: The real module's text and what the broken copy says instead (None: ``new`` is a new module).
    old: str | None
    new: str


BROKEN = [
    Broken(
        "the agent's git entered as root (the working copy's runner given the agent's path)",
        "adapters/git/working_copy.py",
        "                cwd=TRUSTED_CWD,\n",
        "                cwd=self.path,\n",
    ),
    Broken(
        "the Copilot CLI started in the agent's working copy",
        "adapters/copilot.py",
        "                working_directory=TRUSTED_CWD,\n",
        "                working_directory=request.working_directory or TRUSTED_CWD,\n",
    ),
    Broken(
        "the framework clone's git made to drop to the agent (its cwd is root's, but entered first)",
        "adapters/git/framework_clone.py",
        "                cwd=self.path,\n                env=self._env(authenticated=authenticated),\n",
        "                cwd=self.path,\n                user=1001,\n                env=self._env(authenticated=authenticated),\n",
    ),
    Broken(
        "FINDINGS' pattern in new code: subprocess with the agent's cwd and user",
        "agent/purge.py",
        None,
        "import subprocess\n\n\ndef purge(dirs, uid):\n"
        "    subprocess.run(['git', 'clean', '-fdx'], cwd=dirs.work, user=uid, check=True)\n",
    ),
    Broken(
        "setpriv's command started in the agent's directory",
        "agent/tidy.py",
        None,
        "import asyncio\n\n\nasync def tidy(user, work):\n"
        "    program, args = user.command('git', 'gc')\n"
        "    await asyncio.create_subprocess_exec(program, *args, cwd=work)\n",
    ),
    Broken(
        "a root process started in the agent's directory without a drop",
        "agent/sizes.py",
        None,
        "import subprocess\n\n\ndef size(dirs):\n"
        "    return subprocess.check_output(['du', '-s', '.'], cwd=dirs.agent)\n",
    ),
    Broken(
        "the host enters the agent's directory itself",
        "agent/walk.py",
        None,
        "import os\nimport subprocess\n\n\ndef walk(dirs):\n"
        "    os.chdir(dirs.work)\n    subprocess.run(['ls'])\n",
    ),
]


@pytest.mark.parametrize("b", BROKEN, ids=[b.case for b in BROKEN])
def test_a_broken_copy_is_caught(b: Broken) -> None:
    if b.old is None:
        source = b.new
    else:
        real = (PACKAGE / b.module).read_text()
        assert real.count(b.old) == 1, f"{b.module} changed: the broken copy no longer applies"
        assert not findings(real, b.module)
        source = real.replace(b.old, b.new)

    assert findings(source, b.module), "the broken copy passed the guard"
