"""The router's decision: ``route(event, snapshot, policy) -> effects`` — pure.

Routing is an explicit table keyed by (event, action) (:data:`ROUTES`), composed of one
table per topic: :mod:`.issues`, :mod:`.comments`, :mod:`.pull_requests`, :mod:`.ci`,
:mod:`.merge_queue` and :mod:`.commands` (the framework's own). Each handler reads the :class:`Snapshot` — the
registry items the shell loaded for this event, as :func:`snapshot_request` asked — and
returns typed effects, built with :mod:`.builders`. The policy the handlers follow is
:class:`RoutingPolicy` (:mod:`.policy`, built in the shell from the repository's
configuration). The same event against the same snapshot always gives the same effects,
and an event replayed against the state its first processing left behind gives nothing
new: that is what makes redelivery harmless.
"""

from squadron.domain.routing.builders import is_idle, launch_token
from squadron.domain.routing.commands import AGENT_COMMANDS, agent_envelope_problem
from squadron.domain.routing.normalize import CommentEvent, as_webhook, closing_references, normalize_comment
from squadron.domain.routing.policy import RoutingPolicy
from squadron.domain.routing.snapshot import Handler, IssueView, Snapshot, SnapshotRequest, snapshot_request
from squadron.domain.routing.table import ROUTES, route, routed_pairs

__all__ = [
    "AGENT_COMMANDS",
    "ROUTES",
    "CommentEvent",
    "Handler",
    "IssueView",
    "RoutingPolicy",
    "Snapshot",
    "SnapshotRequest",
    "agent_envelope_problem",
    "as_webhook",
    "closing_references",
    "is_idle",
    "launch_token",
    "normalize_comment",
    "route",
    "routed_pairs",
    "snapshot_request",
]
