"""Pipelines (the reference's unified pipelines): the ``pipelines:`` of ``.squadron/config.yaml``, as a pure, typed model.

* :mod:`.models` — the definitions (the reference's format, extra keys refused)
* :mod:`.conditions` — what a pipeline tests: stage conditions and gate checks
* :mod:`.checks` — what crosses models: stage references, roles, sub-pipelines, loops, sizes
* :mod:`.templates` — ``{{ expression }}`` values, checked and rendered in a sandbox
* :mod:`.limits` — every bound, by name (docs/pipelines.md lists them)
* :mod:`.compile` — a checked pipeline as a Step Functions state machine definition (ASL), with
  :mod:`.own_states` (delays, parallels, sub-pipelines, reminders) and :mod:`.asl` (names, keys)

Nothing here runs anything: the adapter (squadron.adapters.step_functions) publishes and runs
what :mod:`.compile` makes, and the router answers its tasks.
"""
