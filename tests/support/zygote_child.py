"""A module for the zygote's tests: run as ``__main__``, it writes what its process is (its
arguments, environment, session, stdin) as JSON on stdout and exits with its first argument's code,
or waits for SIGTERM when that is ``wait``."""

from __future__ import annotations

import json
import os
import signal
import sys

if __name__ == "__main__":
    print(
        json.dumps(
            {
                "argv": sys.argv,
                "env": dict(os.environ),
                "pid": os.getpid(),
                "session": os.getsid(0),
                "group": os.getpgid(0),
                "stdin": os.readlink("/proc/self/fd/0"),
            }
        ),
        flush=True,
    )
    if sys.argv[1] == "wait":
        signal.pause()
    sys.exit(int(sys.argv[1]))
