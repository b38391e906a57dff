"""A module for the zygote's tests: run as ``__main__``, it writes what its process is (its
arguments, environment, user, groups, umask, directory, session, descriptors, limits, signals,
capabilities) as JSON on stdout and exits with its first argument's code, or waits for SIGTERM
when that is ``wait``."""

from __future__ import annotations

import json
import os
import resource
import signal
import sys

#: The lines of /proc/self/status a process inherits from whoever started it.
STATUS = (
    "Umask",
    "SigBlk",
    "SigIgn",
    "CapInh",
    "CapPrm",
    "CapEff",
    "CapBnd",
    "CapAmb",
    "NoNewPrivs",
    "Seccomp",
)


def describe() -> dict[str, object]:
    with open("/proc/self/status", encoding="ascii") as lines:
        status = dict(line.rstrip("\n").split(":\t", 1) for line in lines if ":\t" in line)
    descriptors = os.listdir("/proc/self/fd")  # the listing's own descriptor is among them
    return {
        "argv": sys.argv,
        "env": dict(os.environ),
        "pid": os.getpid(),
        "session": os.getsid(0),
        "group": os.getpgid(0),
        "uid": os.getresuid(),
        "gid": os.getresgid(),
        "groups": sorted(os.getgroups()),
        "cwd": os.getcwd(),
        "descriptors": {
            fd: os.readlink(f"/proc/self/fd/{fd}")
            for fd in descriptors
            if os.path.exists(f"/proc/self/fd/{fd}")
        },
        "rlimits": {
            name: resource.getrlimit(getattr(resource, name))
            for name in dir(resource)
            if name.startswith("RLIMIT_")
        },
        "handlers": {str(number): str(signal.getsignal(number)) for number in sorted(signal.valid_signals())},
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "status": {name: status.get(name, "").strip() for name in STATUS},
    }


if __name__ == "__main__":
    print(json.dumps(describe()), flush=True)
    if sys.argv[1] == "wait":
        signal.pause()
    sys.exit(int(sys.argv[1]))
