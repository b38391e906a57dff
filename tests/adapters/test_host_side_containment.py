"""The host never acts as root inside an agent's files: the attacker's side, played for real.

Two agents share a volume, each with its own uid; the attacker (A) controls everything in its own
directory between tasks. It replaces its working copy by a link to the other agent's (B's) files or
to the framework's clone of B's repository, flips that link while the host prepares, and plants
hooks and configuration that the host's preparation would run. What the attacker may hold on to
is a process of its own uid: the Copilot CLI the host starts, or the git it runs on the agent's
behalf. Every test asserts on what the attacker obtained: B's file contents, a root-only file read
through a setuid-root program (any the image has; ``su``, ``passwd`` and ``mount`` are), code of
its own run at all.

Switching users needs root (CI runs as root).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from squadron.adapters import copilot
from squadron.adapters.confinement import AgentDirs, AgentUser, prepare
from squadron.adapters.copilot import CopilotRuntime, SessionRequest
from squadron.adapters.git import FrameworkClone, GitError, GitRemote, WorkingCopy
from squadron.domain.permissions import Caller, CallerKind
from tests.support.git_remote import BareRemote, let_others_pass
from tests.support.obtained import secrets_in

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="switching to an agent's own user needs root (CI runs as root)"
)

ATTACKER, VICTIM = "1-2-feat-dev", "1-1-feat-dev"
A_USER = AgentUser(1 << 24 | 5102, 1 << 24 | 5102)
B_USER = AgentUser(1 << 24 | 5101, 1 << 24 | 5101)
BRANCH = "feat/issue-2"
B_SECRET = "VICTIM-ONLY-5e1f0a77"  # in B's repository (so in the framework's clone of it) and its notes
ROOT_SECRET = "ROOT-ONLY-9c4d2b18"  # a file only root may read
A_DEV = Caller(CallerKind.DEV, ATTACKER, "feat-dev", BRANCH)


@dataclass
class World:
    tmp: Path
    root: Path
    tools: Path
    suid_cat: Path
    root_secret: Path
    a: WorkingCopy
    b: WorkingCopy

    @property
    def a_dirs(self) -> AgentDirs:
        return AgentDirs(self.root, ATTACKER)

    @property
    def b_dirs(self) -> AgentDirs:
        return AgentDirs(self.root, VICTIM)

    def as_a(self, path: Path) -> Path:
        """``path`` (made by the test as root) handed to the attacker."""
        assert A_USER.uid is not None and A_USER.gid is not None
        for where in [path, *(path.rglob("*") if path.is_dir() else [])]:
            os.chown(where, A_USER.uid, A_USER.gid, follow_symlinks=False)
        return path

    def obtained(self, where: Path) -> set[str]:
        """The secrets in what the attacker copied out (loose git objects decompressed)."""
        return secrets_in(where, (B_SECRET, ROOT_SECRET))


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def _working_copy(root: Path, agent_id: str, user: AgentUser, remote: BareRemote) -> WorkingCopy:
    dirs = AgentDirs(root, agent_id)
    prepare(dirs, user)
    return WorkingCopy(
        dirs.work,
        FrameworkClone(dirs.framework_clone, GitRemote(remote.url)),
        author_name=f"{agent_id} (squadron)",
        author_email="squadron[bot]@users.noreply.github.com",
        user=user,
        home=dirs.home,
        transfers=dirs.transfers,
    )


@pytest.fixture
def world(tmp_path: Path) -> World:
    let_others_pass(tmp_path)  # the agents' users pass through the test's directories, as in ECS
    tools = tmp_path / "tools"
    tools.mkdir(mode=0o755)
    suid_cat = tools / "suid-cat"  # a setuid-root program the image has
    shutil.copy2("/bin/cat", suid_cat)
    suid_cat.chmod(0o4755)
    root_secret = tools / "root-secret"
    root_secret.write_text(ROOT_SECRET + "\n")
    root_secret.chmod(0o600)
    remote_a = BareRemote.create(tmp_path / "github-a", {"README.md": "# a\n"})
    remote_b = BareRemote.create(tmp_path / "github-b", {"README.md": "# b\n", "secret.txt": B_SECRET + "\n"})
    root = tmp_path / "agents-root"
    b = _working_copy(root, VICTIM, B_USER, remote_b)
    b.prepare("feat/issue-1", "main")
    notes = b.path / "notes"  # a directory of B's with its own modes (a tool's, or made before umask 077)
    notes.mkdir(mode=0o755)
    (notes / "notes.txt").write_text(B_SECRET + "\n")
    assert B_USER.uid is not None and B_USER.gid is not None
    for path in (notes, notes / "notes.txt"):
        os.chown(path, B_USER.uid, B_USER.gid)
    (notes / "notes.txt").chmod(0o644)
    a = _working_copy(root, ATTACKER, A_USER, remote_a)
    return World(tmp_path, root, tools, suid_cat, root_secret, a, b)


# --- the working copy replaced by a link -------------------------------------------------------

#: Where the attacker's link points: a directory of B's working copy that others may read (its
#: parents may not), and one inside the framework's clone of B's repository.
TARGETS: dict[str, Callable[[World], Path]] = {
    "a directory of B's working copy": lambda w: w.b_dirs.work / "notes",
    "the objects of the framework's clone of B": lambda w: w.b_dirs.framework_clone / "objects",
}


def _link_work(world: World, target: Path) -> None:
    """The attacker, between two tasks: its ``work`` becomes a link (its directory is its own)."""
    work = world.a_dirs.work
    subprocess.run(
        [*_as_a(), "sh", "-c", 'rm -rf -- "$1" && ln -s -- "$2" "$1"', "sh", str(work), str(target)],
        check=True,
    )


def _as_a() -> list[str]:
    return ["setpriv", f"--reuid={A_USER.uid}", f"--regid={A_USER.gid}", "--clear-groups"]


def _instrumented_git(world: World, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``git`` first on the host's PATH that, in a process of the agent's uid, copies out
    whatever that process can read from where it was started and what a setuid-root program reads
    for it, then runs git. It stands for the agent's code that sees such a process (its
    ``/proc/<pid>/cwd``, a hook): what it copies, the attacker has."""
    stolen = world.a_dirs.home / "stolen"
    bin_dir = world.tools / "bin"
    bin_dir.mkdir(mode=0o755)
    real = shutil.which("git")
    assert real is not None
    _script(
        bin_dir / "git",
        f'if [ "$(id -u)" != 0 ]; then\n'
        f'  mkdir -p "{stolen}/$$" && cp -r . "{stolen}/$$/" 2>/dev/null\n'
        f'  "{world.suid_cat}" "{world.root_secret}" > "{stolen}/$$.root" 2>/dev/null\n'
        f"fi\n"
        f'exec "{real}" "$@"\n',
    )
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return stolen


@pytest.mark.parametrize("target", list(TARGETS.values()), ids=list(TARGETS))
def test_a_link_in_place_of_the_working_copy_leads_the_hosts_git_nowhere_the_agent_cannot_go(
    world: World, monkeypatch: pytest.MonkeyPatch, target: Callable[[World], Path]
) -> None:
    world.a.prepare(BRANCH, "main")  # its first task
    _link_work(world, target(world))
    stolen = _instrumented_git(world, monkeypatch)
    try:  # its next task: the host prepares the working copy again, and saves it at the end
        world.a.prepare(BRANCH, "main")
        world.a.save(A_DEV, BRANCH, "WIP")
    except GitError:
        pass  # git found no working copy where the link leads: fine, as long as nothing leaked
    assert world.obtained(stolen) == set()


def test_a_link_flipped_while_the_host_prepares_leads_nowhere_the_agent_cannot_go(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race: the link points at the attacker's own working copy when the host looks and at B's
    files when it acts, and back, as fast as the attacker can flip it."""
    world.a.prepare(BRANCH, "main")
    own = world.a_dirs.agent / "own"
    work = world.a_dirs.work
    stop = world.a_dirs.agent / "stop"
    subprocess.run([*_as_a(), "mv", "--", str(work), str(own)], check=True)
    flipper = subprocess.Popen(
        [
            *_as_a(),
            "/usr/bin/python3",  # the system's: the agent's user can run it
            "-c",
            "import itertools, os, sys\n"
            "work, own, other, stop = sys.argv[1:]\n"
            "aside = itertools.count()\n"
            "while not os.path.exists(stop):\n"
            "    for target in (own, other):\n"
            "        os.symlink(target, work + '.new')\n"
            "        while True:\n"
            "            try:\n"
            "                os.replace(work + '.new', work)\n"
            "                break\n"
            "            except IsADirectoryError:  # the host made a directory there: move it aside\n"
            "                try:\n"
            "                    os.rename(work, f'{work}.{next(aside)}')\n"
            "                except FileNotFoundError:\n"
            "                    pass\n",
            str(work),
            str(own),
            str(world.b_dirs.work / "notes"),
            str(stop),
        ]
    )
    stolen = _instrumented_git(world, monkeypatch)
    try:
        for _ in range(6):
            try:
                world.a.prepare(BRANCH, "main")
            except GitError:
                continue  # the link led to B's files, where the agent's own git may not go
    finally:
        stop.touch()
        assert flipper.wait() == 0
    assert world.obtained(stolen) == set()


@pytest.mark.parametrize("target", list(TARGETS.values()), ids=list(TARGETS))
def test_a_link_in_place_of_the_working_copy_leads_the_cli_nowhere_the_agent_cannot_go(
    world: World, monkeypatch: pytest.MonkeyPatch, target: Callable[[World], Path]
) -> None:
    """The Copilot CLI is started in the working copy: whatever the CLI's process can read, the
    model's shell reads. This CLI copies out what its directory holds, then exits."""
    stolen = world.a_dirs.home / "stolen"
    cli = _script(world.tools / "copilot", f'cp -r . "{stolen}" 2>/dev/null\nexit 1\n')
    monkeypatch.setattr(copilot, "CLI_START_PAUSE_SECONDS", 0)
    _link_work(world, target(world))
    runtime = CopilotRuntime(cli_path=str(cli), home=str(world.root), env={"PATH": os.environ["PATH"]})
    runtime.confine(A_USER, world.a_dirs)
    request = SessionRequest(
        session_id="s",
        resume=False,
        model="m",
        provider=None,
        system_prompt="",
        prompt="",
        tools=(),
        host_tools=(),
        pre_tool_use=lambda name, args: None,
        timeout_seconds=5,
        working_directory=str(world.a_dirs.work),
    )
    with pytest.raises(RuntimeError):
        asyncio.run(runtime.turn(request))
    assert world.obtained(stolen) == set()


# --- hooks and configuration planted for the host's preparation ---------------------------------


def test_the_hosts_preparation_runs_none_of_the_agents_hooks_or_configured_programs(
    world: World,
) -> None:
    """The agent's hooks, fsmonitor, filter and signing program each try a setuid-root program."""
    wc = world.a
    wc.prepare(BRANCH, "main")
    home = world.a_dirs.home
    got = home / "got"
    body = f'echo ran >> "{got}"\n"{world.suid_cat}" "{world.root_secret}" >> "{got}" 2>/dev/null\n'
    hooks = home / "hooks"
    hooks.mkdir()
    for name in ("post-checkout", "post-merge", "post-commit", "reference-transaction", "pre-auto-gc"):
        _script(hooks / name, body + "exit 0\n")
    program = _script(home / "program.sh", body + "cat\n")
    world.as_a(home)
    plants = [
        ("core.hooksPath", str(hooks)),
        ("core.fsmonitor", str(program)),
        ("filter.steal.smudge", str(program)),
        ("filter.steal.clean", str(program)),
        ("filter.steal.required", "true"),
        ("commit.gpgSign", "true"),
        ("gpg.program", str(program)),
    ]
    for key, value in plants:
        subprocess.run([*_as_a(), "git", "-C", str(wc.path), "config", key, value], check=True)
    attributes = wc.path / ".git" / "info" / "attributes"
    attributes.parent.mkdir(exist_ok=True)
    attributes.write_text("* filter=steal\n")
    (wc.path / "feature.py").write_text("ok = 1\n")
    world.as_a(wc.path)

    saved = [wc.save(A_DEV, BRANCH, "WIP")]  # the end of its task: commit and push
    (wc.path / "README.md").write_text("# a, changed\n")
    world.as_a(wc.path / "README.md")
    wc.prepare(BRANCH, "main")  # its next task: fetch, checkout
    saved.append(wc.save(A_DEV, BRANCH, "WIP 2"))
    assert not got.exists()  # none of its code ran, so it read nothing as root
    assert all("pushed" in said for said in saved), saved


def test_the_git_the_host_runs_for_the_agent_cannot_gain_privileges(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even a program the agent got to run in the host's git process would hold no privilege: no
    setuid program raises it (no_new_privs), no capability is left in its bounding set."""
    stolen = _instrumented_git(world, monkeypatch)
    world.a.prepare(BRANCH, "main")
    assert list(stolen.glob("*.root"))  # the instrumented git ran as the agent
    assert world.obtained(stolen) == set()


# --- the framework's trees are private at every level --------------------------------------------


def test_no_level_of_the_framework_clone_is_readable_even_from_a_process_inside_it(world: World) -> None:
    """A process of another uid whose cwd is in the clone (subprocess enters a cwd as root) reads
    nothing: every directory and file is the host's alone, a clone made before included."""
    old = world.tmp / "agents-root" / "framework" / "old.git"
    subprocess.run(
        ["git", "init", "--quiet", "--bare", str(old)], check=True, env={"PATH": os.environ["PATH"]}
    )
    os.chmod(old, 0o700)  # what an earlier release left: private at its top only
    clones = [world.b.clone, FrameworkClone(old, world.b.clone.remote)]
    clones[1].ensure()
    for clone in clones:
        for directory in [clone.path, *(p for p in clone.path.rglob("*") if p.is_dir())]:
            peek = subprocess.run(
                ["sh", "-c", "ls -A; cat -- * */* 2>/dev/null"],
                cwd=directory,
                user=A_USER.uid,
                group=A_USER.gid,
                extra_groups=[],
                capture_output=True,
                check=False,
            )
            assert peek.stdout == b"", directory  # no name, no byte


#: What an agent's ``.git/config`` (or a file it includes) may name for git to run: each value is
#: the planted program (``{program}``: it notes that it ran and exits), the key is every place git
#: looks for a command. The working tree's ``.gitattributes`` names the drivers
#: (``diff=evil merge=evil filter=...``); the filters (``{filter}``) pass their input through.
PROGRAMS: tuple[tuple[str, str], ...] = (
    ("diff.evil.command", "{program}"),
    ("diff.evil.textconv", "{program}"),
    ("diff.external", "{program}"),
    ("merge.evil.driver", "{program} %O %A %B"),
    ("merge.verifySignatures", "true"),
    ("log.showSignature", "true"),
    ("gpg.program", "{program}"),
    ("gpg.ssh.program", "{program}"),
    ("core.pager", "{filter}"),
    ("pager.log", "{filter}"),
    ("core.editor", "{program}"),
    ("sequence.editor", "{program}"),
    ("core.sshCommand", "{program}"),
    ("core.askPass", "{program}"),
    ("credential.helper", "!{program}"),
    ("core.hooksPath", "{hooks}"),
    ("core.alternateRefsCommand", "{program}"),
    # The host's fetches from a bundle path, led to a transport that runs a command.
    ("url.ext::{program} %S #.insteadOf", "/"),
    ("protocol.ext.allow", "always"),
    # Filters defined only in an included file, and one included only under a condition.
    ("include.path", "{home}/included.cfg"),
    ("includeIf.gitdir:/.path", "{home}/conditional.cfg"),
)


def test_no_driver_or_program_the_agents_git_config_names_runs_in_any_framework_git_step(
    world: World,
) -> None:
    """The attacker's working copy names diff, merge and filter drivers in ``.gitattributes`` and
    defines them (and a pager, editors, an ssh command, signing programs, credential helpers,
    hooks, a URL rewrite to a command transport, included files) in its ``.git/config``. Every git
    step the framework takes in that working copy (preparing, fast-forwarding, committing, pushing,
    a rejected push, a review's checkout) runs none of it: the marker the programs write never
    appears, and the pushes carry what the agent wrote, unfiltered."""
    wc = world.a
    remote = BareRemote(world.tmp / "github-a" / "remote.git", world.tmp / "github-a" / "human")
    wc.prepare(BRANCH, "main")
    home = world.a_dirs.home
    marker = home / "marker"
    program = _script(home / "program.sh", f'echo "ran: $0 $*" >> "{marker}"\n')
    filter_program = _script(home / "filter.sh", f'echo "filtered: $*" >> "{marker}"\nexec cat\n')
    hooks = home / "hooks"
    hooks.mkdir()
    for name in ("post-checkout", "post-merge", "post-commit", "pre-commit", "reference-transaction"):
        _script(hooks / name, f'echo "hook {name}" >> "{marker}"\n')
    for name, condition in (("included.cfg", "sneaky"), ("conditional.cfg", "hidden")):
        (home / name).write_text(
            f'[filter "{condition}"]\n\tclean = {filter_program}\n\tsmudge = {filter_program}\n'
            f"\tprocess = {filter_program}\n\trequired = true\n"
        )
    world.as_a(home)
    values = {"program": str(program), "filter": str(filter_program), "hooks": str(hooks), "home": str(home)}
    for key, value in PROGRAMS:
        subprocess.run(
            [
                *_as_a(),
                "git",
                "-C",
                str(wc.path),
                "config",
                "--add",
                key.format(**values),
                value.format(**values),
            ],
            check=True,
        )
    (wc.path / ".gitattributes").write_text(
        "* diff=evil merge=evil\n*.py filter=sneaky\n*.md filter=hidden\n"
    )
    (wc.path / "feature.py").write_text("ok = 1\n")
    world.as_a(wc.path)

    said = [wc.save(A_DEV, BRANCH, "WIP")]  # the end of its task: add, commit, push
    remote.commit(BRANCH, {"other.md": "a human's change\n"}, "a human pushes")
    said.append(wc.prepare(BRANCH, "main"))  # its next task: fetch, fast-forward (checkout, merge)
    (wc.path / "README.md").write_text("# a, changed\n")
    world.as_a(wc.path / "README.md")
    said.append(wc.save(A_DEV, BRANCH, "WIP 2"))
    remote.commit(BRANCH, {"late.md": "while the agent worked\n"}, "a human pushes again")
    (wc.path / "more.py").write_text("more = 2\n")
    world.as_a(wc.path / "more.py")
    said.append(wc.save(A_DEV, BRANCH, "WIP 3"))  # rejected: the remote moved (fetch, bundle)
    said.append(wc.prepare_review(f"refs/heads/{BRANCH}", remote.sha(BRANCH) or ""))

    assert not marker.exists(), marker.read_text()
    assert "pushed" in said[0] and "fast-forwarded" in said[1] and "pushed" in said[2], said
    assert "rejected" in said[3], said
    assert remote.show(BRANCH, "feature.py") == "ok = 1"  # what the agent wrote, no filter applied


# --- a branch that leans on objects the agent was never given ------------------------------------

#: Where the framework's clone of the attacker's repository stands when the attack begins.
CLONES: dict[str, Callable[[World], None]] = {
    "a clone that holds the agent's branches only": lambda w: None,
    "a clone an older release filled with every branch": lambda w: w.a.clone.fetch(
        "+refs/heads/*:refs/heads/*"
    ),
}


@pytest.mark.parametrize("clone", list(CLONES.values()), ids=list(CLONES))
def test_a_commit_grafted_on_another_branch_gets_the_agent_nothing_of_that_branch(
    world: World, clone: Callable[[World], None]
) -> None:
    """Another agent's branch of the same repository (B_SECRET in it) is on the remote; the attacker
    learned its head commit's id. It writes a commit whose parent is that commit, marks its own
    commit shallow so its git bundles it without the parent it lacks, and lets the host save its
    work, then prepare its next task. Had the framework's clone held that branch, the bundle would
    pass the clone's connectivity check, the push would put the other branch's history under the
    attacker's, and the next checkout would hand it over (a delta against an object of that branch
    would do as much)."""
    remote = BareRemote(world.tmp / "github-a" / "remote.git", world.tmp / "github-a" / "human")
    other = remote.commit("feat/issue-1", {"secret.txt": B_SECRET + "\n"}, "another agent's work")
    clone(world)
    world.a.prepare(BRANCH, "main")  # its first task
    crafted = (
        'T=$(git write-tree) && printf "tree %s\\nparent %s\\nauthor a <a@b> 0 +0000\\n'
        'committer a <a@b> 0 +0000\\n\\ngrafted\\n" "$T" "$1" '
        "| git hash-object -t commit -w --stdin --literally > .git/shallow "
        '&& git update-ref "refs/heads/$2" "$(cat .git/shallow)"'
    )
    subprocess.run(
        [*_as_a(), "sh", "-c", f'cd "$3" && {crafted}', "sh", other, BRANCH, str(world.a.path)], check=True
    )
    said = world.a.save(A_DEV, BRANCH, "WIP")  # the end of its task
    # Between its tasks: nothing shallow any more, no branch and no commit of its own, so the next
    # checkout brings the whole of what its branch on the remote holds.
    forget = (
        'C=$(cat .git/shallow) && git checkout -q --detach origin/main && git update-ref -d "refs/heads/$2" '
        '&& rm -f .git/shallow ".git/objects/${C%${C#??}}/${C#??}" && git update-ref -d "refs/remotes/origin/$2"'
    )
    subprocess.run(
        [*_as_a(), "sh", "-c", f'cd "$1" && {forget}', "sh", str(world.a.path), BRANCH], check=True
    )
    world.a.prepare(BRANCH, "main")  # its next task
    assert world.obtained(world.a_dirs.agent) == set(), said
    pushed = remote.sha(BRANCH)
    assert pushed is None or "another agent's work" not in remote.log(BRANCH), said


def test_a_bundle_handed_to_another_agent_cannot_be_read_by_the_attacker_who_learned_its_name(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B's branch crosses into its working copy as a bundle in the shared transfers directory;
    A sees the bundle's name (another agent's git command line shows in ``/proc``) and reads it
    while B's git fetches it."""
    stolen = world.tmp / "stolen-bundles"
    stolen.mkdir()
    world.as_a(stolen)
    tried: list[Path] = []
    checked = world.b._checked

    def fetch_while_the_attacker_reads(args: list[str], **kwargs: Any) -> str:
        for bundle in world.b.transfers.glob("*.bundle"):
            tried.append(bundle)
            subprocess.run(
                [*_as_a(), "sh", "-c", 'cat -- "$1" > "$2/$(basename "$1")"', "sh", str(bundle), str(stolen)],
                check=False,
                capture_output=True,
            )
        return checked(args, **kwargs)

    monkeypatch.setattr(world.b, "_checked", fetch_while_the_attacker_reads)
    world.b.prepare("feat/issue-1", "main")  # B's next task: its branch crosses again
    assert tried, "no bundle crossed while B's working copy was prepared"
    assert world.obtained(stolen) == set()
    assert all(b.stat().st_size == 0 for b in stolen.glob("*.bundle"))  # nothing read at all
