"""Bounds on what a repository's ``pipelines:`` may ask of the framework (issue 30, item 6).

A pipeline is compiled into a state machine that runs for days on the repository's behalf:
a hostile or careless ``.squadron/config.yaml`` must be refused by ``squadron validate`` (and
by the router, which reads the same file) with the line that passes a bound, never become a
runaway execution — endless retries, thousands of parallel branches, a reminder a second, a
sub-pipeline that expands into itself. docs/pipelines.md lists every bound; a test keeps the
list in step with :data:`LIMITS`.
"""

from __future__ import annotations

# --- shape ------------------------------------------------------------------------------------

#: Most pipelines in one repository's ``pipelines:``.
MAX_PIPELINES = 20
#: Most stages in one pipeline.
MAX_STAGES = 50
#: Most branches of one parallel stage.
MAX_PARALLEL_BRANCHES = 10
#: Most stages one triggered pipeline runs when every sub-pipeline is expanded in place
#: (branches count as stages): what drives the size of the compiled state machine.
MAX_EXPANDED_STAGES = 200
#: Deepest chain of sub-pipelines (a pipeline calling one calling one...), as the reference.
MAX_NESTING_DEPTH = 5
#: Most conditions of one gate stage (``conditions`` or ``any_of``).
MAX_GATE_CONDITIONS = 20
#: Deepest nesting of ``any`` / ``all`` in a stage's ``condition``.
MAX_CONDITION_DEPTH = 4
#: Most sub-conditions of one ``any`` / ``all`` and most globs of one ``paths_match``.
MAX_CONDITION_ITEMS = 20
#: Most reactive handlers (``on_events``) of one pipeline.
MAX_ON_EVENTS = 20
#: Most lifecycle actions of one pipeline's ``on_complete`` or ``on_error``.
MAX_LIFECYCLE_ACTIONS = 10
#: Longest stage, branch or pipeline id.
MAX_ID_LENGTH = 64
#: Most ``expected_outputs`` of one agent or webhook stage (as many as an agent may report,
#: :data:`squadron.domain.commands.MAX_OUTPUTS`).
MAX_EXPECTED_OUTPUTS = 20
#: Longest name of one expected output (an agent's output key's bound).
MAX_OUTPUT_NAME_LENGTH = 64
#: Longest path of a ``file_exists`` check.
MAX_PATH_LENGTH = 512
#: Most distinct paths one gate's ``file_exists`` checks name together (each one read from GitHub
#: whenever the gate is judged).
MAX_GATE_PATHS = 20

# --- repetition -------------------------------------------------------------------------------

#: Most retries of a stage on error (``on_error.retry``).
MAX_RETRIES = 5
#: Most loops of a failed gate back to ``on_fail.goto`` (``on_fail.max_iterations``).
MAX_ITERATIONS = 10
#: Most extensions of a timed-out stage (``on_timeout.max_extensions``).
MAX_EXTENSIONS = 5
#: Most reminders of a human stage (``notify.reminder.max_reminders``).
MAX_REMINDERS = 10
#: Shortest interval between two reminders of a human stage, in seconds.
MIN_REMINDER_INTERVAL = 3600
#: Most completions a human stage may wait for (``human.count``).
MAX_HUMAN_COUNT = 10

# --- time (seconds) ---------------------------------------------------------------------------

#: Shortest duration anywhere (a timeout, a delay, an extension).
MIN_DURATION = 1
#: Longest timeout of one stage, delay or timeout extension.
MAX_STAGE_TIMEOUT = 7 * 86400
#: Shortest interval of a delay stage's poll.
MIN_POLL_INTERVAL = 10
#: Longest run of one pipeline, sub-pipelines included (its ``timeout``).
MAX_RUN_TIME = 30 * 86400
#: A pipeline's run time when it names none.
DEFAULT_RUN_TIME = 7 * 86400

# --- templates --------------------------------------------------------------------------------

#: Longest template (a string value holding ``{{ }}``), in characters.
MAX_TEMPLATE_CHARS = 2000
#: Deepest nesting of brackets in one template expression.
MAX_TEMPLATE_NESTING = 16
#: Longest value a template renders to, in characters.
MAX_RENDERED_CHARS = 64 * 1024

#: Every limit above by name (docs/pipelines.md's table is kept in step by a test).
LIMITS: dict[str, int] = {
    "MAX_PIPELINES": MAX_PIPELINES,
    "MAX_STAGES": MAX_STAGES,
    "MAX_PARALLEL_BRANCHES": MAX_PARALLEL_BRANCHES,
    "MAX_EXPANDED_STAGES": MAX_EXPANDED_STAGES,
    "MAX_NESTING_DEPTH": MAX_NESTING_DEPTH,
    "MAX_GATE_CONDITIONS": MAX_GATE_CONDITIONS,
    "MAX_CONDITION_DEPTH": MAX_CONDITION_DEPTH,
    "MAX_CONDITION_ITEMS": MAX_CONDITION_ITEMS,
    "MAX_ON_EVENTS": MAX_ON_EVENTS,
    "MAX_LIFECYCLE_ACTIONS": MAX_LIFECYCLE_ACTIONS,
    "MAX_ID_LENGTH": MAX_ID_LENGTH,
    "MAX_EXPECTED_OUTPUTS": MAX_EXPECTED_OUTPUTS,
    "MAX_OUTPUT_NAME_LENGTH": MAX_OUTPUT_NAME_LENGTH,
    "MAX_PATH_LENGTH": MAX_PATH_LENGTH,
    "MAX_GATE_PATHS": MAX_GATE_PATHS,
    "MAX_RETRIES": MAX_RETRIES,
    "MAX_ITERATIONS": MAX_ITERATIONS,
    "MAX_EXTENSIONS": MAX_EXTENSIONS,
    "MAX_REMINDERS": MAX_REMINDERS,
    "MIN_REMINDER_INTERVAL": MIN_REMINDER_INTERVAL,
    "MAX_HUMAN_COUNT": MAX_HUMAN_COUNT,
    "MIN_DURATION": MIN_DURATION,
    "MAX_STAGE_TIMEOUT": MAX_STAGE_TIMEOUT,
    "MIN_POLL_INTERVAL": MIN_POLL_INTERVAL,
    "MAX_RUN_TIME": MAX_RUN_TIME,
    "DEFAULT_RUN_TIME": DEFAULT_RUN_TIME,
    "MAX_TEMPLATE_CHARS": MAX_TEMPLATE_CHARS,
    "MAX_TEMPLATE_NESTING": MAX_TEMPLATE_NESTING,
    "MAX_RENDERED_CHARS": MAX_RENDERED_CHARS,
}
