"""What the registry knows of an issue or pull request: its agents, state, blockers and links
(the :class:`~squadron.registry_ports.IssueGraph` port)."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from squadron.adapters.registry.keys import (
    TTL_ATTRIBUTE,
    agent_from,
    dump_item,
    epoch_us,
    iso,
    issue_pk,
    load_item,
)
from squadron.adapters.registry.table import RegistryTable
from squadron.domain.agents import AgentRecord, IssueState
from squadron.domain.effects import AgentWrite
from squadron.domain.issue_budget import LiveSpend
from squadron.domain.routing import IssueView
from squadron.domain.usage import ModelTokens

#: The sort key of a running task's spend in its costed issue's partition, and how long it is kept.
LIVE_PREFIX = "LIVE#"
LIVE_RETENTION = timedelta(days=7)


def _live_from(item: Mapping[str, Any]) -> LiveSpend:
    return LiveSpend(
        agent_id=str(item["SK"]).removeprefix(LIVE_PREFIX),
        launch_token=str(item.get("launch_token") or ""),
        tokens=tuple(ModelTokens.model_validate(t) for t in json.loads(str(item.get("tokens") or "[]"))),
        active_seconds=int(item.get("active_seconds") or 0),
        at=datetime.fromisoformat(str(item["at"])) if item.get("at") else None,
    )


class DynamoIssueGraph(RegistryTable):
    """One Query per issue read; news stored unless newer news is; edges and links transacted."""

    def issue_view(self, repo_id: int, number: int) -> IssueView:
        agents: list[AgentRecord] = []
        state: dict[str, Any] = {}
        blockers: set[int] = set()
        blocks: set[int] = set()
        linked: int | None = None
        prs: set[int] = set()
        live: dict[str, LiveSpend] = {}
        pk = issue_pk(repo_id, number)
        for item in self._unheld(self._partition(pk), lambda: self._partition(pk)):
            sk: str = item["SK"]
            if sk.startswith("AGENT#"):
                agents.append(agent_from(item))
            elif sk == "STATE":
                state = item
            elif sk.startswith("BLOCKED_BY#"):
                if not item.get("resolved"):
                    blockers.add(int(sk.removeprefix("BLOCKED_BY#")))
            elif sk.startswith("BLOCKS#"):
                blocks.add(int(sk.removeprefix("BLOCKS#")))
            elif sk == "PRLINK":
                linked = int(item["issue_number"])
            elif sk.startswith("PR#"):
                prs.add(int(sk.removeprefix("PR#")))
            elif sk.startswith(LIVE_PREFIX):
                spend = _live_from(item)
                live[spend.agent_id] = spend
        return IssueView(
            number=number,
            state=IssueState(state["state"]) if state.get("state") else None,
            state_at=datetime.fromisoformat(state["state_at"]) if state.get("state_at") else None,
            app_assigned=state.get("app_assigned"),
            assigned_at=datetime.fromisoformat(state["assigned_at"]) if state.get("assigned_at") else None,
            vouched_by=state.get("vouched_by"),
            agents=tuple(sorted(agents, key=lambda a: a.agent_id)),
            blockers=frozenset(blockers),
            blocks=frozenset(blocks),
            linked_issue=linked,
            pull_requests=frozenset(prs),
            live=live,
        )

    def record_live_spend(self, repo_id: int, issue: int, spend: LiveSpend) -> None:
        """Keep what a running task has spent so far in its costed issue's partition (``LIVE#<agent>``).

        The agent gateway writes it for the task's host before each model call it admits; one
        item per agent, replaced each time (the host sends them one at a time), gone a week
        after its last report. It counts only while it is the agent's running launch's
        (:func:`squadron.domain.issue_budget.live_counts`).
        """
        at = spend.at or datetime.now(UTC)
        item = {
            "PK": issue_pk(repo_id, issue),
            "SK": f"{LIVE_PREFIX}{spend.agent_id}",
            "entity": "live_spend",
            "launch_token": spend.launch_token,
            "tokens": json.dumps([t.model_dump(mode="json") for t in spend.tokens], separators=(",", ":")),
            "active_seconds": spend.active_seconds,
            "at": iso(at),
            TTL_ATTRIBUTE: int((at + LIVE_RETENTION).timestamp()),
        }
        self._call("put_item", TableName=self.table_name, Item=dump_item(item))

    def branch_links(self, repo_id: int, branches: Iterable[str]) -> dict[str, int]:
        links: dict[str, int] = {}
        for branch in dict.fromkeys(branches):
            response = self._call(
                "get_item",
                TableName=self.table_name,
                Key=dump_item({"PK": f"BRANCH#{repo_id}#{branch}", "SK": "BRANCH"}),
                ConsistentRead=True,
            )
            if "Item" in response:
                links[branch] = int(load_item(response["Item"])["issue_number"])
        return links

    def blocker_graph(self, repo_id: int, roots: Iterable[int], max_hops: int) -> dict[int, frozenset[int]]:
        """Breadth-first over the edge items: one Query per issue reached, never a Scan."""
        graph: dict[int, set[int]] = {}
        seen = set(roots)
        frontier = deque((root, 0) for root in seen)
        while frontier:
            node, hops = frontier.popleft()
            if hops > max_hops:
                continue
            items = self._query(
                KeyConditionExpression="PK = :pk AND begins_with(SK, :b)",
                FilterExpression="resolved = :open",
                ExpressionAttributeValues={
                    ":pk": {"S": issue_pk(repo_id, node)},
                    ":b": {"S": "B"},  # BLOCKED_BY# and BLOCKS#
                    ":open": {"BOOL": False},
                },
                ConsistentRead=True,
            )
            for item in items:
                sk: str = item["SK"]
                if sk.startswith("BLOCKED_BY#"):
                    issue, blocker = node, int(sk.removeprefix("BLOCKED_BY#"))
                elif sk.startswith("BLOCKS#"):
                    issue, blocker = int(sk.removeprefix("BLOCKS#")), node
                else:
                    continue
                graph.setdefault(issue, set()).add(blocker)
                for nxt in (issue, blocker):
                    if nxt not in seen:
                        seen.add(nxt)
                        frontier.append((nxt, hops + 1))
        return {issue: frozenset(blockers) for issue, blockers in graph.items()}

    def _set_news(
        self, repo_id: int, number: int, fields: dict[str, Any], at_name: str, at: datetime
    ) -> None:
        names = {f"#{key}": key for key in fields} | {"#at": at_name, "#epoch": f"{at_name}_epoch"}
        values = {f":{key}": value for key, value in fields.items()} | {
            ":at": at.isoformat(),
            ":epoch": epoch_us(at),
        }
        assignments = ", ".join(f"#{key} = :{key}" for key in fields)
        try:
            self._call(
                "update_item",
                TableName=self.table_name,
                Key=dump_item({"PK": issue_pk(repo_id, number), "SK": "STATE"}),
                UpdateExpression=f"SET {assignments}, #at = :at, #epoch = :epoch",
                ConditionExpression="attribute_not_exists(#epoch) OR #epoch <= :epoch",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=dump_item(values),
            )
        except ClientError:
            return  # newer news is stored: this older event changes nothing

    def set_issue_state(self, repo_id: int, number: int, state: IssueState, at: datetime) -> None:
        self._set_news(repo_id, number, {"state": str(state)}, "state_at", at)

    def set_issue_assignment(self, repo_id: int, number: int, assigned: bool, at: datetime) -> None:
        self._set_news(repo_id, number, {"app_assigned": assigned}, "assigned_at", at)

    def vouch_issue(self, repo_id: int, number: int, by: str, at: datetime) -> None:
        self._set_news(repo_id, number, {"vouched_by": by}, "vouched_at", at)

    def add_blocker(
        self, repo_id: int, issue: int, blocker: int, agent: AgentWrite | None, at: datetime
    ) -> None:
        parts = self._add_blocker_parts(repo_id, issue, blocker)
        if agent is not None:
            self._write_agent(agent, *parts)
        else:
            self._transact(parts)

    def remove_blocker(
        self, repo_id: int, issue: int, blocker: int, agent: AgentWrite | None, at: datetime
    ) -> None:
        parts = self._remove_blocker_parts(repo_id, issue, blocker)
        if agent is not None:
            self._write_agent(agent, *parts)
        elif parts:
            self._transact(parts)

    def link_pull_request(
        self, repo_id: int, pr_number: int, issue_number: int, agent: AgentWrite | None, at: datetime
    ) -> None:
        parts = self._link_parts(repo_id, pr_number, issue_number)
        if agent is not None:
            self._write_agent(agent, *parts)
        else:
            self._transact(parts)
