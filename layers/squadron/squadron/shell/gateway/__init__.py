"""The agent gateway: the one narrow door between an agent task and the framework.

An agent task's AWS role may invoke this function and nothing else that matters:
it holds no rights on the registry, the events queue, Secrets Manager or
CloudWatch. Every call carries the agent id, the launch token and the launch's
secret (:mod:`squadron.domain.launches`); the gateway verifies them first and
then acts only on that agent's own things:

=================  ==============================================================
op                 what the verified task gets
=================  ==============================================================
``whoami``         its own record and the App's login (what the task needs to set itself up)
``begin``          its lease, its record (CREATED becomes ACTIVE), its own POSIX uid
``heartbeat``      its lease renewed (refused once another task holds it)
``release``        its lease given up (also while winding down)
``inbox``/``ack``  its own inbox items
``github_token``   a read-only installation token for its repository (issues, pull
                   requests, code): what the task reads GitHub and fetches with
``push_token``     a dev agent's token to push its branch (contents only), used by the
                   framework's own clone, never in the agent's directory; also while
                   winding down, for the save as its agent is put to sleep or escalated
                   (:func:`squadron.domain.launches.check_push`)
``github``         a write the task asks for (a comment, an issue, its pull request, a
                   review, its status, labels, the App's assignment), checked against the
                   role table with the caller built from the agent's record and carried out
                   here, with a token narrowed to the role: the task holds no write token for it.
                   What the router must hear of (the App's own webhooks are dropped at the
                   ingress) is put on events.fifo here as a typed command built from
                   GitHub's answer (:data:`REPORTED`), never from the task's words
``model_key``      the provider key its own role's configuration names (BYOK, or the
                   Copilot token), nothing else
``issue_spend``    what its task has spent so far kept for its issue's other agents, and what
                   they have spent (recorded, and their running tasks' last reports): what its
                   model gateway judges the issue's budget by (:mod:`squadron.domain.issue_budget`)
``send``           an envelope on events.fifo: a command about itself (a blocker, how its
                   task ended, that it pushed its branch — its PR is then read from
                   GitHub), checked against its role; the repository,
                   installation, sender and the command's agent are stamped here from
                   the verified record, never taken from the task
``metrics``        its task's metric points published (catalogue names only)
``remember``       a fact proposed to its repository's memory (seen only by itself until a
                   person confirms it: :mod:`squadron.domain.memory`)
``recall``         the facts of its repository's memory it may see that match a query
``brief``          what its session starts with: the repository's shared context
                   (``.squadron/context.md`` and the project section, from the default branch),
                   the most relevant facts it may see, and the artifacts made for its issue
``publish_artifact`` an artifact it produces (the PM: for any issue; others: their own)
``read_artifact``  an artifact of its repository, its read recorded among the consumers
``purge_claim``    the janitor's page (at most PURGE_PAGE) of finished agents whose state is
                   past the retention, each claimed for it (:mod:`squadron.domain.retention`):
                   their ids and nothing else. Any kind of agent's task, once it holds its
                   own lease (its host is root on the shared volume, where the ids are the
                   directories' names anyway)
``purged``         the agents it claimed and whose directories are gone, recorded purged
                   (once; an agent restarted meanwhile only loses the claim)
=================  ==============================================================

A refusal is ``{"error", "code"}`` with a code from
:data:`squadron.domain.launches.REFUSAL_CODES`, counted by the handler.

The package: :mod:`.protocol` (requests parsed, answers served: the models are
:mod:`squadron.domain.gateway_wire`, shared with the task's door), :mod:`.verify` (who is calling),
:mod:`.service` (the gateway, dispatching each ``op`` from its table of handlers), and one module
per group of operations: :mod:`.task` (whoami, the lease, the inbox, credentials, send,
metrics), :mod:`.writes` (``github``), :mod:`.memory` (memory, brief and artifacts) and
:mod:`.janitor` (``purge_claim``, ``purged``).
"""

from squadron.domain.gateway_wire import Request
from squadron.domain.launches import LEASE_TTL
from squadron.shell.gateway.protocol import Answer, Served, parse_request, sanitized
from squadron.shell.gateway.service import HANDLERS, AgentGateway, GatewayRegistry
from squadron.shell.gateway.writes import REPORTED, WRITE_LOOKBACK, inert_write

__all__ = [
    "HANDLERS",
    "LEASE_TTL",
    "REPORTED",
    "WRITE_LOOKBACK",
    "AgentGateway",
    "Answer",
    "GatewayRegistry",
    "Request",
    "Served",
    "inert_write",
    "parse_request",
    "sanitized",
]
