"""The agent registry on one DynamoDB table: every port of :mod:`squadron.registry_ports` at once.

Access patterns and where they live (``PK`` / ``SK``; ``<r>`` repository id):

=====================================  =========================================  ==============
What                                   Item                                       Read with
=====================================  =========================================  ==============
an issue's agents (one per role)       ``ISSUE#<r>#<n>`` / ``AGENT#<role>``       Query on PK
the repository's PM                    ``REPO#<r>`` / ``AGENT#pm``                GetItem
an agent by id                         (the id names its partition and role)      GetItem
issue state, App assignment            ``ISSUE#<r>#<n>`` / ``STATE``              Query on PK
"#n is blocked by #b"                  ``ISSUE#<r>#<n>`` / ``BLOCKED_BY#<b>``     Query on PK
"who is blocked by #b" (reverse edge)  ``ISSUE#<r>#<b>`` / ``BLOCKS#<n>``         Query on PK
PR → issue                             ``ISSUE#<r>#<pr>`` / ``PRLINK``            Query on PK
issue → PRs                            ``ISSUE#<r>#<n>`` / ``PR#<pr>``            Query on PK
branch → issue                         ``BRANCH#<r>#<branch>`` / ``BRANCH``       GetItem
reviews of a PR, latest per reviewer   ``ISSUE#<r>#<pr>`` / ``REVIEW#<login>``    Query on PK
an agent's inbox, oldest first         ``INBOX#<agent>`` / ``<time>#<delivery>#<kind>``  Query on PK
agents by status (reconciler)          GSI ``by-status``: ``STATUS#<s>`` / ``<updated>#<agent>``  Query on GSI
finished agents whose state is kept    GSI ``by-status``: ``STATUS#<COMPLETED|CANCELLED>`` /      Query on GSI
  (the janitor, through the gateway)   ``<finished>#<agent>`` (``purged#<agent>`` once purged)
who owns a POSIX uid (agent gateway)   ``UID#<uid>`` / ``UID``                    PutItem (claim)
a committed decision (the outbox)      ``DECISION#<delivery>`` / ``DECISION``     GetItem
decisions not carried out yet          GSI ``by-status``: ``DECISION#OPEN#<s>`` / ``<time>#<key>``  Query on GSI
a committed domain event (the stream)  ``EVENT#<event id>`` / ``EVENT``           the table's stream
a repository's history, by time        GSI ``by-status``: ``HISTORY#<r>`` / ``<time>#<event id>``  Query on GSI
the gate's verdict and what it said    ``ISSUE#<r>#<pr>`` / ``GATE``              GetItem, BatchGetItem
a change set (docs/change-sets.md)     ``CHANGESET#<id>`` / ``CHANGESET``         GetItem
change sets, newest first              GSI ``by-status``: ``CHANGESETS`` / ``<created>#<id>``  Query on GSI
an installation's open change sets     ``CHANGESETS#<installation>`` / ``OPEN``   GetItem
=====================================  =========================================  ==============

So everything the router needs about one number is one Query on its
partition (:meth:`DynamoRegistry.issue_view`), and no read is ever a Scan.
Every write is conditional: agents on their ``version`` (or on not existing
yet), state and assignment on the GitHub time of the news they carry, reviews
on the review id, inbox items on not existing, launch confirmations on the
pending launch token, leases on the current holder. Writes that span items
(an edge and its reverse, an agent and its branch or PR link) are one
TransactWriteItems. A lost condition raises
:class:`~squadron.domain.agents.ConflictError`; a write whose condition only
guards against older news is a silent no-op, as in the in-memory fake.

Each port has its adapter module under :mod:`squadron.adapters.registry` (agents, agent
listings, issue graph, inboxes, launches, leases, write claims, gate records, decisions, the
outbox, history, change sets); :class:`DynamoRegistry` mixes them over one table, so one instance (and one
``_call``) serves them all. The names other modules import from here are kept here.
"""

from __future__ import annotations

from squadron.adapters.registry.agent_listings import DynamoAgentListings
from squadron.adapters.registry.agents import DynamoAgentRecords
from squadron.adapters.registry.change_sets import DynamoChangeSets
from squadron.adapters.registry.decisions import DynamoDecisions
from squadron.adapters.registry.gate import DynamoGateRecords
from squadron.adapters.registry.history import DynamoHistory
from squadron.adapters.registry.human_waits import DynamoHumanWaits
from squadron.adapters.registry.inbox import DynamoInboxes
from squadron.adapters.registry.issue_graph import DynamoIssueGraph
from squadron.adapters.registry.keys import (
    BATCH_GET_KEYS,
    DECISION_RETENTION,
    DECISION_SHARDS,
    EVENT_ENTITY,
    EVENT_STREAM,
    HELD_BY,
    HELD_ENTITY,
    HISTORY_ENTITY,
    HISTORY_RETENTION,
    PURGED_SORT_PREFIX,
    STATUS_INDEX,
    TABLE_DEFINITION,
    TRANSACTION_ITEMS,
    TTL_ATTRIBUTE,
    dump_item,
    history_pk,
    history_time,
    issue_pk,
    load_item,
)
from squadron.adapters.registry.launches import DynamoLaunches
from squadron.adapters.registry.leases import DynamoLeases
from squadron.adapters.registry.outbox import DecisionOutbox
from squadron.adapters.registry.pipeline_run_index import DynamoPipelineRunIndex
from squadron.adapters.registry.stage_waits import DynamoStageWaits
from squadron.adapters.registry.table import DynamoTable, RegistryUnavailableError
from squadron.adapters.registry.write_claims import DynamoWriteClaims

__all__ = [
    "BATCH_GET_KEYS",
    "DECISION_RETENTION",
    "DECISION_SHARDS",
    "EVENT_ENTITY",
    "EVENT_STREAM",
    "HELD_BY",
    "HELD_ENTITY",
    "HISTORY_ENTITY",
    "HISTORY_RETENTION",
    "PURGED_SORT_PREFIX",
    "STATUS_INDEX",
    "TABLE_DEFINITION",
    "TRANSACTION_ITEMS",
    "TTL_ATTRIBUTE",
    "DynamoRegistry",
    "DynamoTable",
    "RegistryUnavailableError",
    "dump_item",
    "history_pk",
    "history_time",
    "issue_pk",
    "load_item",
]


class DynamoRegistry(
    DynamoAgentRecords,
    DynamoAgentListings,
    DynamoIssueGraph,
    DynamoInboxes,
    DynamoLaunches,
    DynamoLeases,
    DynamoWriteClaims,
    DynamoGateRecords,
    DynamoDecisions,
    DynamoHistory,
    DecisionOutbox,
    DynamoHumanWaits,
    DynamoPipelineRunIndex,
    DynamoChangeSets,
    DynamoStageWaits,
):
    """The agent registry (:class:`~squadron.ports.Registry`) on its table: every port's adapter."""
