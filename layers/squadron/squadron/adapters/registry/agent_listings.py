"""Agents by status, on the status index (the :class:`~squadron.registry_ports.AgentListings` port)."""

from __future__ import annotations

from datetime import datetime

from squadron.adapters.registry.keys import PURGED_SORT_PREFIX, STATUS_INDEX, agent_from, load_item, sortable
from squadron.adapters.registry.table import RegistryTable
from squadron.domain.agents import TERMINAL, AgentRecord, AgentStatus


class DynamoAgentListings(RegistryTable):
    """The reconciler's, the janitor's and the dashboards' reads of agents by status."""

    def agents_with_status(self, status: AgentStatus) -> list[AgentRecord]:
        """Every agent in ``status`` (the reconciler's sweep), oldest update first (finished ones by
        their finish, purged ones last)."""
        items = self._query(
            IndexName=STATUS_INDEX,
            KeyConditionExpression="GSI1PK = :s",
            ExpressionAttributeValues={":s": {"S": f"STATUS#{status}"}},
        )
        return [agent_from(item) for item in items]

    def finished_agents(self, before: datetime, limit: int) -> list[AgentRecord]:
        """Up to ``limit`` finished agents whose state was not purged, finished before ``before``,
        the longest finished first (the janitor's; eventually consistent: a write conditional on
        the version settles what to do)."""
        return self._finished_below(sortable(before), limit, newest_first=False)[:limit]

    def recently_finished(self, limit: int) -> list[AgentRecord]:
        """Up to ``limit`` agents of each terminal status that finished last (their state not
        purged yet), newest first (the dashboards' "Recently ended"; eventually consistent)."""
        return self._finished_below(PURGED_SORT_PREFIX, limit, newest_first=True)

    def _finished_below(self, bound: str, limit: int, *, newest_first: bool) -> list[AgentRecord]:
        """The finished agents whose sort key (when they finished; ``purged#`` after every time)
        is below ``bound``: one bounded page of the status index per terminal status, from the
        oldest or the newest, merged in that order."""
        found: list[tuple[str, AgentRecord]] = []
        for status in sorted(TERMINAL):
            page = self._call(
                "query",
                TableName=self.table_name,
                IndexName=STATUS_INDEX,
                KeyConditionExpression="GSI1PK = :s AND GSI1SK < :bound",
                ExpressionAttributeValues={":s": {"S": f"STATUS#{status}"}, ":bound": {"S": bound}},
                ScanIndexForward=not newest_first,
                Limit=limit,
            )
            for item in page.get("Items", []):
                loaded = load_item(item)
                found.append((str(loaded["GSI1SK"]), agent_from(loaded)))
        return [record for _, record in sorted(found, key=lambda pair: pair[0], reverse=newest_first)]
