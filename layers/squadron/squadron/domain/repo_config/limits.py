"""Bounds on what a repository's ``.squadron/`` may ask of the parser and the merge gate.

Every repository that installs the App writes its own configuration, and the
router, the agent gateway and the reconciler read it from GitHub on behalf of
every other repository too: a file that is huge, deeply nested or that expands
without end must be refused with a precise problem, quickly and in bounded
memory, never parsed until something gives. The same limits apply to
``squadron validate`` and to the default branch read through GitHub, and the
docs/repository-configuration.md's "Limits" section lists them.

Real configurations are far below every one of them (this repository's own
``.squadron/`` is about 20 KB in 10 files, nests 6 levels deep and uses no
alias).
"""

from __future__ import annotations

# --- files ------------------------------------------------------------------------------------

#: Largest configuration file (config.yaml, an agent definition, approval-flows.yaml).
MAX_FILE_BYTES = 128 * 1024
#: Largest sum of every configuration file read.
MAX_TOTAL_BYTES = 512 * 1024
#: Most configuration files (``*.yaml``, ``*.yml``, ``*.md`` in .squadron/, agents/, workflows/).
MAX_FILES = 50
#: Longest shared context (``.squadron/context.md``), in characters: every session starts with it.
MAX_CONTEXT_CHARS = 16_000
#: Largest YAML front matter of an agent definition (the Markdown body is the rest of the file).
MAX_FRONT_MATTER_BYTES = 16 * 1024

# --- YAML -------------------------------------------------------------------------------------

#: Deepest nesting of mappings and lists in one YAML document (aliases included).
MAX_YAML_DEPTH = 32
#: Most aliases (``*name``) in one YAML document.
MAX_YAML_ALIASES = 100
#: Most values (mappings, lists, scalars) one YAML document may build, every alias expanded.
MAX_YAML_NODES = 20_000

# --- globs ------------------------------------------------------------------------------------

#: Longest path glob (protected_paths) or branch pattern (branch_rules).
MAX_GLOB_LENGTH = 256
#: Most path globs in one approval-flows.yaml, every flow's protected_paths together.
MAX_PATH_GLOBS = 100
#: Most branch rules in one approval-flows.yaml.
MAX_BRANCH_RULES = 50
#: Most changed files of a pull request the merge gate matches against protected paths. A pull
#: request with more (GitHub lists at most 3,000) is judged as touching every protected path.
MAX_CHANGED_FILES = 1000
#: Longest changed file path the gate matches; a longer one touches every protected path.
MAX_CHANGED_PATH_LENGTH = 1024
#: Most matching the gate does for one pull request: the characters of its changed paths times
#: the path globs of its flow (1,000 paths of 100 characters against 20 globs); past it, the
#: pull request touches every protected path. Each unit costs well under a microsecond.
MAX_MATCH_WORK = 2_000_000

# --- lists read from GitHub -------------------------------------------------------------------

#: Most items read from one of GitHub's lists (an issue's comments, a PR's reviews, files and
#: check runs, a repository's branches): anyone can grow some of them. Past it the list is cut
#: (the reader says so) and the merge gate, unable to see every review, does not merge.
MAX_LISTED = 3000

#: Every limit above by name (a test keeps docs/repository-configuration.md's table in step).
LIMITS: dict[str, int] = {
    "MAX_FILE_BYTES": MAX_FILE_BYTES,
    "MAX_TOTAL_BYTES": MAX_TOTAL_BYTES,
    "MAX_FILES": MAX_FILES,
    "MAX_FRONT_MATTER_BYTES": MAX_FRONT_MATTER_BYTES,
    "MAX_CONTEXT_CHARS": MAX_CONTEXT_CHARS,
    "MAX_YAML_DEPTH": MAX_YAML_DEPTH,
    "MAX_YAML_ALIASES": MAX_YAML_ALIASES,
    "MAX_YAML_NODES": MAX_YAML_NODES,
    "MAX_GLOB_LENGTH": MAX_GLOB_LENGTH,
    "MAX_PATH_GLOBS": MAX_PATH_GLOBS,
    "MAX_BRANCH_RULES": MAX_BRANCH_RULES,
    "MAX_CHANGED_FILES": MAX_CHANGED_FILES,
    "MAX_CHANGED_PATH_LENGTH": MAX_CHANGED_PATH_LENGTH,
    "MAX_MATCH_WORK": MAX_MATCH_WORK,
    "MAX_LISTED": MAX_LISTED,
}
