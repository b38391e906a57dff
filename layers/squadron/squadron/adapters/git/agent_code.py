"""What the host's git in an agent's working copy never takes from the agent's configuration.

Git there runs as the agent's user (:mod:`squadron.adapters.git.working_copy`), but on the host's
behalf: every setting that names a program is overridden on the command line, which git reads
last, so none of the agent's code runs in a step the host takes (see docs/security.md).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

#: What git run in the working copy on the agent's behalf never takes from the agent's own
#: configuration (these settings come last, on the command line, so they win): no hook, no
#: fsmonitor, no signing or verifying, no pager, editor, ssh, askpass or credential program, no
#: alternate-refs command, no submodule recursion, no attributes file outside the working tree, no
#: transport but reading a file (the host only ever fetches a bundle there). Settings that name a
#: program under a name the agent chose (a driver, a URL) are overridden by name
#: (:func:`agent_code_off`).
HOST_SIDE = {
    "core.hooksPath": os.devnull,
    "core.fsmonitor": "false",
    "commit.gpgSign": "false",
    "tag.gpgSign": "false",
    "push.gpgSign": "false",
    "merge.verifySignatures": "false",
    "log.showSignature": "false",
    "gpg.program": "false",
    "gpg.openpgp.program": "false",
    "gpg.x509.program": "false",
    "gpg.ssh.program": "false",
    "gpg.ssh.defaultKeyCommand": "false",
    "core.pager": "cat",
    "core.editor": "false",
    "sequence.editor": "false",
    "core.sshCommand": "false",
    "core.askPass": "false",
    "credential.helper": "",
    "diff.external": "",
    "core.alternateRefsCommand": "true",
    "core.attributesFile": os.devnull,
    "submodule.recurse": "false",
    "fetch.recurseSubmodules": "false",
    "gc.auto": "0",
    "maintenance.auto": "false",
    "protocol.allow": "never",
    "protocol.file.allow": "always",
}
#: A program-valued setting under a subsection the agent names (``diff.<driver>.command``), by
#: section and key: the value that runs nothing (an empty filter is no filter; a driver or program
#: that is ``false`` fails, never runs the agent's).
_NAMED_PROGRAMS: dict[tuple[str, str], str] = {
    ("filter", "clean"): "",
    ("filter", "smudge"): "",
    ("filter", "process"): "",
    ("filter", "required"): "false",
    ("diff", "command"): "false",
    ("diff", "textconv"): "false",
    ("merge", "driver"): "false",
    ("credential", "helper"): "",
    ("gpg", "program"): "false",
    ("trailer", "command"): "false",
    ("trailer", "cmd"): "false",
    ("submodule", "update"): "none",
    ("protocol", "allow"): "never",
}


def agent_code_off(names: Sequence[str]) -> dict[str, str]:
    """Command-line settings that take from the agent's configuration keys ``names`` (as
    ``git config --list --name-only`` gives them, includes followed) every program they name:
    each driver the agent defined (filter, diff, merge), credential helper, per-format signing
    program, per-command pager, trailer command and submodule update command is overridden by its
    own name; every transport it allowed is forbidden again (reading a file excepted)."""
    off: dict[str, str] = {}
    for name in names:
        section, _, rest = name.partition(".")
        middle, _, key = rest.rpartition(".")
        section, key = section.lower(), key.lower()
        if section == "pager" and not middle:
            off[name] = "false"
            continue
        value = _NAMED_PROGRAMS.get((section, key))
        if value is None or not middle:
            continue
        if section == "filter":
            for each in ("clean", "smudge", "process", "required"):
                off[f"filter.{middle}.{each}"] = _NAMED_PROGRAMS["filter", each]
        elif section == "protocol":
            off[name] = "always" if middle == "file" else value
        else:
            off[name] = value
    return off
