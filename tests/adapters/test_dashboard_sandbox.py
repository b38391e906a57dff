"""The dashboard issue on the GitHub sandbox, written through the real adapter: the body GitHub
keeps starts with the role tag the adapter puts before every body it writes, and a rendering
that shows the same thing a minute later (or an hour) edits nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.client import GitHubClient
from squadron.adapters.github.http import GitHubHttp, Throttle
from squadron.domain import dashboard
from squadron.domain.dashboard_refresh import RefreshRequest
from squadron.domain.domain_events import Repository
from squadron.domain.permissions import Caller
from squadron.local.sandbox import GitHubSandbox
from squadron.shell.dashboards import DashboardService
from tests.support.events import T0, Events
from tests.support.fake_dashboards import FakeDashboardSlots, SimulatedQueue
from tests.support.github_fake import app_private_key
from tests.support.world import World

REPO = "octo/repo"


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[tuple[GitHubSandbox, str]]:
    github = GitHubSandbox(tmp_path / "sandbox", app_id=424242, webhook_secret="s")
    github.add_repository(REPO, {"README.md": "# octo/repo\n"}, permissions={"alice": "write"})
    url = github.start()
    try:
        yield github, url
    finally:
        github.stop()


@pytest.mark.parametrize("later", [timedelta(minutes=1), timedelta(hours=3)], ids=["a minute", "hours"])
def test_a_rendering_that_shows_the_same_edits_nothing(
    sandbox: tuple[GitHubSandbox, str], later: timedelta
) -> None:
    github, url = sandbox
    http = GitHubHttp(base_url=url, sleep=lambda s: None, throttle=Throttle(sleep=lambda s: None))
    private, _ = app_private_key()
    app = GitHubApp(app_id=424242, http=http, private_key=lambda: private)
    world, events = World(), Events(full_name=REPO)
    world.send(events.assigned(38))
    clock = [T0]

    def reader(installation: int | None, repo: str) -> GitHubClient:
        token = app.installation_token(installation or 77).token
        return GitHubClient(
            http=app.http, token=lambda: token, installation_id=77, repo=repo, caller=Caller.framework()
        )

    service = DashboardService(
        registry=world.registry,
        slots=FakeDashboardSlots(),
        queue=SimulatedQueue(clock=lambda: clock[0]),
        reader=reader,
        bot_login=github.bot_login,
        clock=lambda: clock[0],
    )
    sweep = RefreshRequest(repository=Repository(id=1, full_name=REPO), installation=77, cause="sweep")
    opened = service.refresh([sweep])
    assert len(opened.edited) == 1, opened
    kept = reader(77, REPO).list_issues(labels=(dashboard.LABEL,))[0]["body"]
    assert kept.startswith("[squadron:framework] ")  # what GitHub keeps: the adapter's tag first

    clock[0] = T0 + later
    again = service.refresh([sweep])
    assert (again.rendered, again.edited) == ([REPO], [])  # compared, not written
    assert reader(77, REPO).list_issues(labels=(dashboard.LABEL,))[0]["body"] == kept

    world.send(events.assigned(39))  # what it shows changes: one edit
    clock[0] = T0 + later + timedelta(minutes=1)
    changed = service.refresh([sweep])
    assert len(changed.edited) == 1 and "feat-dev-39" in reader(77, REPO).list_issues()[0]["body"]
