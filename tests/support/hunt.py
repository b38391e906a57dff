"""The search an attacker's shell makes of every process it may read, shared by the attacks on
the model gateway (tests/e2e/test_containment.py) and on the Copilot token
(tests/agent/test_copilot_gateway.py): Python source, put before an attack script."""

#: Defines ``search_processes(patterns, memory=None)``: every process this user may read, its
#: environment and command line searched with every pattern, its readable memory (regions under
#: 256 MiB) with the patterns ``memory`` names (all when None). Returns what each pattern found
#: and how many processes' memory it could read.
SEARCH_PROCESSES = r"""
import os


def search_processes(patterns, memory=None):
    found = {name: set() for name in patterns}
    in_memory = {name: patterns[name] for name in (patterns if memory is None else memory)}
    readable = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        for part in ("environ", "cmdline"):
            try:
                data = open(f"/proc/{pid}/{part}", "rb").read()
            except OSError:
                continue
            for name, pattern in patterns.items():
                found[name].update(m.decode() for m in pattern.findall(data))
        try:
            maps = open(f"/proc/{pid}/maps").read().splitlines()
            mem = open(f"/proc/{pid}/mem", "rb", 0)
        except OSError:
            continue
        readable += 1
        for line in maps:
            span, perms = line.split()[:2]
            start, end = (int(x, 16) for x in span.split("-"))
            if "r" not in perms or end - start > 1 << 28:
                continue
            try:
                mem.seek(start)
                data = mem.read(end - start)
            except (OSError, ValueError, OverflowError):
                continue
            for name, pattern in in_memory.items():
                found[name].update(m.decode() for m in pattern.findall(data))
    return found, readable
"""
