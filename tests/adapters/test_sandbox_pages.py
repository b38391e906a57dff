"""The sandbox's HTML pages, read over HTTP: what a person sees of issues, pull requests (their diff,
comments, review, statuses and check runs) and the dashboard, with links that lead somewhere, and
a stranger's text shown as text (no element, attribute or link of theirs survives)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest

from squadron.domain import dashboard
from squadron.domain.app_manifest import web_url_for
from squadron.domain.memory import Evidence, MemoryFact
from tests.support.browsable_sandbox import GRAPH, HOSTILE_TITLE, REPO, Browsable, browsable_sandbox


class Parsed(HTMLParser):
    """The elements of a page: (tag, attributes) in order, and its text."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def links(self) -> list[str]:
        return [a["href"] for tag, a in self.elements if tag == "a" and "href" in a]

    def scripts(self) -> list[str]:
        return [a.get("src", "<inline>") for tag, a in self.elements if tag == "script"]


NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browsable]:
    with browsable_sandbox(tmp_path_factory.mktemp("pages")) as built:
        yield built


def get(site: Browsable, path: str) -> httpx.Response:
    return httpx.get(f"{site.github.base_url}{path}")


def page(site: Browsable, path: str) -> tuple[Parsed, str]:
    answer = get(site, path)
    assert answer.status_code == 200, (path, answer.status_code)
    assert answer.headers["content-type"] == "text/html; charset=utf-8"
    assert "script-src 'self'" in answer.headers["content-security-policy"]
    return Parsed(answer.text), answer.text


@pytest.mark.parametrize(
    ("path", "expected_text", "expected_links"),
    [
        ("/ui/", ["octo/demo", "octo/other", "2 issues, 1 pull requests"], ["/ui/octo/demo", "/ui/octo/demo/issues/3"]),
        (
            "/ui/octo/demo",
            ["Issues", "Pull requests", "Export the report", "feat/issue-1", HOSTILE_TITLE],
            ["/ui/octo/demo/issues/1", "/ui/octo/demo/pull/2", "/ui/octo/demo/issues/3"],
        ),
        ("/ui/octo/demo/issues/1", [HOSTILE_TITLE, "a-stranger", "Pull requests that close it"], ["/ui/octo/demo/pull/2"]),
        (
            "/ui/octo/demo/pull/2",
            [
                "Export the report", "feat/issue-1", "Closes", "+    return 2", "-    return 1",
                "export.py", "squadron/approval", "approved by octo-human", "tests", "success",
                "APPROVED", "Ship it", "good", "octo-human",
            ],
            ["/ui/octo/demo/issues/1", "/ui/octo/demo"],
        ),
        ("/ui/octo/demo/issues/3", ["Squadron dashboard", "Blockers"], ["/ui/octo/demo/issues/1"]),
    ],
    ids=["index", "repository", "issue", "pull", "dashboard"],
)  # fmt: skip
def test_each_page_shows_its_records_and_links_to_the_others(
    site: Browsable, path: str, expected_text: list[str], expected_links: list[str]
) -> None:
    parsed, _ = page(site, path)
    text = "".join(parsed.text)
    for expected in expected_text:
        assert expected in text, expected
    links = parsed.links()
    for expected in expected_links:
        assert expected in links, expected
    for link in links:  # every link on every page leads somewhere
        assert link.startswith("/ui/"), link
        assert get(site, link.split("#")[0]).status_code == 200, link


def test_the_dashboards_graph_is_marked_for_mermaid_which_the_sandbox_serves(site: Browsable) -> None:
    parsed, _ = page(site, f"/ui/{REPO}/issues/{site.dashboard}")
    assert parsed.scripts() == ["/ui/_assets/mermaid.min.js", "/ui/_assets/pages.js"]
    (_graph,) = [a for tag, a in parsed.elements if tag == "pre" and a.get("class") == "mermaid"]
    assert GRAPH in "".join(parsed.text)  # the graph's text, which mermaid draws
    mermaid = get(site, "/ui/_assets/mermaid.min.js")
    assert mermaid.status_code == 200 and mermaid.headers["content-type"].startswith("text/javascript")
    assert len(mermaid.content) > 1_000_000  # mermaid's own bundle, from node_modules
    assert "mermaid.run" in get(site, "/ui/_assets/pages.js").text


@pytest.mark.parametrize("path", ["/ui/octo/demo/issues/1", "/ui/octo/demo/pull/2", "/ui/octo/demo"])
def test_a_strangers_text_stays_text(site: Browsable, path: str) -> None:
    parsed, html = page(site, path)
    assert parsed.scripts() == []  # no script of theirs, and no mermaid to draw theirs
    assert not [a for tag, a in parsed.elements if tag == "pre" and a.get("class") == "mermaid"]
    assert not [
        (tag, a) for tag, a in parsed.elements if tag in ("img", "b") and any(k.startswith("on") for k in a)
    ]
    assert not [(tag, a) for tag, a in parsed.elements for k in a if k.startswith("on")]
    assert not [link for link in parsed.links() if link.lower().startswith("javascript:")]
    assert "<script>" not in html and "<img" not in html
    if path.endswith("issues/1"):  # what they wrote is shown, as text
        text = "".join(parsed.text)
        assert '<script>window.pwned = "script tag"</script>' in text
        assert "<img src=x onerror=\"window.pwned = 'img onerror'\">" in text
        assert "click a call pwn()" in text


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/ui/octo/nope", 404),
        ("/ui/octo/demo/issues/99", 404),
        ("/ui/octo/demo/pull/1", 404),  # an issue, not a pull request
        ("/ui/octo/demo/commits", 404),
        ("/ui/_assets/..%2F..%2Fetc%2Fpasswd", 404),
        ("/ui/_assets/mermaid.core.mjs", 404),  # only the files the pages use
    ],
)
def test_what_is_not_there_is_not_found(site: Browsable, path: str, status: int) -> None:
    assert get(site, path).status_code == status


def test_an_issue_number_of_a_pull_request_leads_to_the_pull_request(site: Browsable) -> None:
    answer = get(site, f"/ui/{REPO}/issues/{site.pull}")
    assert answer.status_code == 302
    assert answer.headers["location"] == f"/ui/{REPO}/pull/{site.pull}"


def test_the_rest_api_is_unchanged_beside_the_pages(site: Browsable) -> None:
    answer = httpx.get(f"{site.github.base_url}/repos/{REPO}", headers={"authorization": "token human:octo"})
    assert answer.status_code == 200 and answer.json()["full_name"] == REPO
    pulls = httpx.get(
        f"{site.github.base_url}/repos/{REPO}/pulls", headers={"authorization": "token human:octo"}
    ).json()
    assert [p["number"] for p in pulls] == [site.pull]


def test_without_node_modules_the_graph_stays_its_text(tmp_path: Path) -> None:
    with browsable_sandbox(tmp_path) as built:
        built.github.node_modules = None
        parsed, _ = page(built, f"/ui/{REPO}/issues/{built.dashboard}")
        assert "flowchart LR" in "".join(parsed.text)
        assert get(built, "/ui/_assets/mermaid.min.js").status_code == 404


def test_the_links_squadron_builds_from_the_sandboxs_address_lead_to_its_pages(site: Browsable) -> None:
    """In the local stack GitHub's web address is the sandbox's own (web_url_for of its API URL):
    the dashboard's links to issues, pull requests and a fact's evidence lead to their pages."""
    base = site.github.base_url
    web = web_url_for(base)
    fact = MemoryFact(
        fact_id="m-0123456789ab",
        repo_id=1,
        repo_full_name=REPO,
        text="Tests need Redis",
        evidence=Evidence(kind="pull_request", number=site.pull),
        agent_id="1-1-feat-dev",
        role="feat-dev",
        kind="dev",
        status="confirmed",
        created_at=NOW,
        last_used_at=NOW,
    )
    body = dashboard.render(REPO, [], memory=[fact], web_url=web, now=NOW)
    links = re.findall(r"\]\((http[^)]+)\)", body)
    assert links == [f"{base}/{REPO}/pull/{site.pull}"], body
    for link, page_here in [
        (links[0], f"/ui/{REPO}/pull/{site.pull}"),
        (Evidence(kind="issue", number=site.issue).url(REPO, web_url=web), f"/ui/{REPO}/issues/{site.issue}"),
        (f"{web}/{REPO}", f"/ui/{REPO}"),
    ]:
        answer = httpx.get(link)
        assert (answer.status_code, answer.headers.get("location")) == (302, page_here), link
        assert httpx.get(link, follow_redirects=True).status_code == 200, link


@pytest.mark.parametrize(
    ("path", "status"),
    # Another repository's address is no page: the REST API's answer (not one of its operations).
    [("/octo/nowhere/issues/1", 422), ("/app/installations", 401), (f"/{REPO}/issues/999", 404)],
    ids=["no such repository", "a REST path", "no such issue"],
)
def test_only_the_sandboxs_own_repositories_have_web_addresses(
    site: Browsable, path: str, status: int
) -> None:
    answer = httpx.get(f"{site.github.base_url}{path}", follow_redirects=True)
    assert answer.status_code == status, (path, answer.status_code, answer.text[:200])
