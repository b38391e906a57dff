"""The GitHub sandbox: the REST subset Squadron uses, on 127.0.0.1, with signed webhooks.

Every request is first checked against GitHub's published OpenAPI description
(an unknown operation, parameter or body key is refused with 422 and the
reason, where GitHub would often silently ignore it), then applied to an
in-memory GitHub — issues, comments, labels, assignees, pull requests,
reviews, statuses, check runs, contents, branches, webhook deliveries — whose
repositories are real bare git repositories (:mod:`squadron.local.git_store`).
Each change sends the webhook GitHub would send, shaped like GitHub's
published examples and signed with the webhook secret, and is recorded as a
delivery the App can list and redeliver.

Humans act through the same REST API with a token naming them
(``Authorization: token human:<login>``); the App's installation tokens come
from ``POST /app/installations/{id}/access_tokens`` and act as ``<slug>[bot]``.

The sandbox is split by topic: :mod:`.server` (the REST server, :class:`GitHubSandbox`),
:mod:`.webhooks`, :mod:`.state` (saved and loaded across restarts) and one module of
operations each for :mod:`.apps`, :mod:`.repositories`, :mod:`.issues`, :mod:`.pulls` and
:mod:`.checks`, and :mod:`.queues` (merge queues, with the GraphQL they need), on the common ground of :mod:`.base`; :mod:`.pages` shows it all to a person
as HTML under ``/ui/``.
"""

from squadron.local.sandbox.base import ApiError, ApiFault, Delivery, Fault, Json, Repo
from squadron.local.sandbox.server import GitHubSandbox, weak_etag

__all__ = ["ApiError", "ApiFault", "Delivery", "Fault", "GitHubSandbox", "Json", "Repo", "weak_etag"]
