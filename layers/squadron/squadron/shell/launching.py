"""Starting a decided launch exactly once: arm it, start its task, or adopt the task that runs.

A launch is decided in the router's commit (the agent's ``pending_launch``, its token) and
carried out outside it by whoever comes next: the delivery's attempt, a retry of it, the next
event of the agent's issue (the routing table heals a pending launch), the reconciler. Several
may do so at once, none holds a claim for it, and each may die anywhere. The task is armed
with a secret only it holds (only its hash is stored, :mod:`squadron.domain.launches`), so a
retry cannot hand an earlier task's secret to a new one, nor to ECS's client token.

The protocol, for an executor carrying out launch ``L`` of an agent:

1. **Arm**: store the hash of a fresh secret *if L is not armed yet* (a new launch starts
   unarmed: :func:`squadron.domain.lifecycle.transitions.with_launch`). Won: no task of L can
   exist (nobody else held a secret of it), go to 4.
2. **Adopt**: L was armed before. Ask ECS for a task of L that is starting or running (its
   ``startedBy`` is L: :meth:`~squadron.ports.TaskLauncher.find`). Found: that task holds the
   secret of the arming that stands (see 3), so confirm the launch with it; no new secret,
   no RunTask.
3. **Re-arm**: none runs. If the arming is younger than
   :data:`~squadron.domain.launches.ARMING_HELD` its executor may be about to call RunTask:
   leave the launch pending (that executor confirms it, or a later attempt finds it
   abandoned). Older, its executor is gone (the hold outlasts the router Lambda's timeout),
   and its task, if it ever started, has stopped: arm again *replacing that very hash* (a
   conditional write; of two executors here one wins, the other leaves it).
4. **Start**: RunTask with the secret (client token: L and the secret's digest, so the same
   arming never starts two tasks, even when RunTask's answer is lost and botocore retries),
   then confirm the launch with the task (a no-op if it is no longer pending).

Why it is exactly once:

- A crash between RunTask and the confirmation leaves L armed and pending with its task
  running: the next attempt fails to arm (1), finds the task (2) and confirms it. The task
  holds the arming that stands, since an arming is replaced only when no task of L runs (3).
- Two executors at once: only one arms (1 and 3 are conditional writes on the arming they
  saw); the other finds the task (2) or, while the winner has not started it yet, leaves the
  launch to it (3). Neither arms over a secret a live or starting task holds.
- An earlier task of L that has stopped (it crashed before the confirmation) is not adopted
  (2 looks for tasks not stopped): the launch is armed anew (3) and a new task started.

What stays open: a launch left pending because its arming was fresh (3) and whose executor
then died before RunTask is started by the next attempt after the hold (the delivery's retry,
the issue's next event, or the reconciler's "never confirmed" rescue). docs/exactly-once.md.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from squadron.adapters.ecs import TaskLaunchError
from squadron.domain.launches import SECRET_BYTES, SECRET_TTL, arming_abandoned, secret_digest

if TYPE_CHECKING:
    from squadron.ports import Registry, TaskLauncher

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Launched:
    """What an attempt at a launch did: ``started`` a task, ``adopted`` the one an earlier
    attempt started, ``held`` it (RunTask refused: retried with back-off), or ``left`` it (no
    longer pending, or armed by an executor that may still start it)."""

    outcome: Literal["started", "adopted", "held", "left"]
    task_arn: str | None = None
    error: str | None = None


def carry_out_launch(
    registry: Registry,
    launcher: TaskLauncher,
    agent_id: str,
    *,
    purpose: str,
    token: str,
    now: datetime,
) -> Launched:
    """Carry out the pending launch ``token`` of ``agent_id`` by the protocol above."""
    secret = secrets.token_urlsafe(SECRET_BYTES)
    digest, expires = secret_digest(secret), now + SECRET_TTL
    if not registry.arm_launch(agent_id, token, digest, expires, now):
        try:
            found = launcher.find(token)
        except TaskLaunchError as exc:
            # ECS could not be asked: arming again might start a second task; hold the launch
            # (retried with back-off, and the AgentLaunchesHeld alarm tells a human).
            return _hold(registry, agent_id, token, exc, now)
        if found is not None:
            logger.info("launch %s of %s: adopting task %s", token, agent_id, found.rsplit("/", 1)[-1])
            registry.confirm_launch(agent_id, token, found, now)
            return Launched("adopted", found)
        agent = registry.get_agent(agent_id)
        if agent is None or agent.pending_launch != token:
            logger.info("launch %s of %s is no longer pending; not started", token, agent_id)
            return Launched("left")
        if not arming_abandoned(agent, now):
            logger.info("launch %s of %s was armed by another executor just now; left to it", token, agent_id)
            return Launched("left")
        if not registry.arm_launch(agent_id, token, digest, expires, now, replacing=agent.launch_secret_hash):
            logger.info("launch %s of %s was armed again by another executor; left to it", token, agent_id)
            return Launched("left")
    try:
        task_arn = launcher.launch(agent_id, purpose, token, secret)
    except TaskLaunchError as exc:
        # The decision stands (the launch stays pending): a Fargate quota or a lack of capacity
        # is not this event's fault. The reconciler retries the launch with back-off.
        return _hold(registry, agent_id, token, exc, now)
    registry.confirm_launch(agent_id, token, task_arn, now)
    return Launched("started", task_arn)


def _hold(registry: Registry, agent_id: str, token: str, exc: Exception, now: datetime) -> Launched:
    logger.warning("launch %s of %s held: %s", token, agent_id, exc)
    registry.hold_launch(agent_id, token, str(exc), now)
    return Launched("held", error=str(exc))
