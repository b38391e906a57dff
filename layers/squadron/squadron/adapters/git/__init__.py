"""Git for an agent task, split so that framework git never runs anything the agent controls.

Two repositories per agent:

- :class:`FrameworkClone` — a bare clone the host owns (root, 0700, beside the
  agent's directory). Every network operation happens here and only here, with the
  installation token handed to git per command through ``GIT_CONFIG_*``
  environment variables of a process the agent's user cannot read (never in argv,
  never in a file). Its configuration and hooks are the framework's own: nothing
  the agent wrote is ever read by a git that holds a token.
- :class:`WorkingCopy` — the agent's checkout in its own directory. Git there runs
  as the agent's user, confined like the Copilot CLI
  (:meth:`~squadron.adapters.confinement.AgentUser.command`: entered after the drop,
  ``no_new_privs``, no capabilities) with no credentials at all; the host's git there
  runs none of the agent's code: every setting that names a program (hooks,
  ``core.fsmonitor``, pagers, editors, ``core.sshCommand``, signing and credential
  programs, the diff, merge and filter drivers ``.gitattributes`` may name, in the
  agent's ``.git/config`` or any file it includes) is overridden on the command line,
  which git reads last (:func:`agent_code_off`), no transport but reading a file is
  allowed (a ``url.*.insteadOf`` leading to ``ext::`` runs nothing), and what else the
  agent put in its ``.git`` (``remote.*.pushurl``) has nothing worth taking.

Between them travel git bundles, which are data: the framework's refs go to the
agent as a bundle the agent's git fetches; the agent's branch comes back as a
bundle its git writes to a pipe, which the framework clone imports (objects
checked with ``transfer.fsckObjects``) and pushes — only to the agent's own
branch, never with force.
"""

from squadron.adapters.git.agent_code import agent_code_off
from squadron.adapters.git.base import GIT_TIMEOUT_SECONDS, GitError, GitRemote, PushResult, check_branch
from squadron.adapters.git.framework_clone import FrameworkClone
from squadron.adapters.git.working_copy import MAX_BUNDLE_BYTES, WorkingCopy

__all__ = [
    "GIT_TIMEOUT_SECONDS",
    "MAX_BUNDLE_BYTES",
    "FrameworkClone",
    "GitError",
    "GitRemote",
    "PushResult",
    "WorkingCopy",
    "agent_code_off",
    "check_branch",
]
