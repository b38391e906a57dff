"""The sandbox's pages in a real browser (Debian's Chromium, headless): a person goes from the
repository index to a pull request and on to the issue it closes by following links, sees the
diff, the review and the checks, and the dashboard's Mermaid graph drawn as SVG; what a stranger
wrote ran nothing. Each page's screenshot is kept under the test's temporary directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.browsable_sandbox import REPO, Browsable, browsable_sandbox
from tests.support.chromium import Page, chromium, require_chromium, wait_for

#: What any of the stranger's attempts would have set (see HOSTILE).
PWNED = "typeof window.pwned === 'undefined' ? null : String(window.pwned)"


@pytest.fixture
def browser() -> Iterator[Page]:
    require_chromium()
    with chromium() as page:
        yield page


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Browsable]:
    with browsable_sandbox(tmp_path / "sandbox") as built:
        yield built


def follow(browser: Page, selector: str) -> str:
    """Click the link ``selector`` finds; the page it leads to, once loaded."""
    href = browser.evaluate(f"document.querySelector({selector!r}).href")
    browser.evaluate(f"document.querySelector({selector!r}).click()")
    wait_for(f"the page of {href}", lambda: browser.location() == href and browser.ready())
    return str(href)


def text(browser: Page) -> str:
    return str(browser.evaluate("document.body.innerText"))


def test_a_person_follows_links_from_the_index_to_a_pull_request_its_issue_and_the_dashboard(
    browser: Page, site: Browsable, tmp_path: Path
) -> None:
    shots = tmp_path / "screenshots"
    base = site.github.base_url
    browser.open(f"{base}/ui/")
    assert "octo/demo" in text(browser)
    browser.screenshot(shots / "index.png")

    follow(browser, f'a[href="/ui/{REPO}"]')
    follow(browser, f'a[href="/ui/{REPO}/pull/{site.pull}"]')
    shown = text(browser)
    for expected in ("Export the report", "+    return 2", "squadron/approval", "APPROVED", "Ship it"):
        assert expected in shown, expected
    assert browser.evaluate("document.querySelectorAll('pre.diff span.add').length") >= 2
    assert browser.evaluate(PWNED) is None  # the stranger's comment on it ran nothing
    browser.screenshot(shots / "pull.png")

    follow(browser, f'ul.linked a[href="/ui/{REPO}/issues/{site.issue}"]')
    shown = text(browser)
    assert '<script>window.pwned = "script tag"</script>' in shown  # shown as what they wrote
    assert browser.evaluate(PWNED) is None
    assert browser.evaluate("document.querySelectorAll('main script, main img, pre.mermaid').length") == 0
    assert browser.evaluate("[...document.links].filter(a => a.protocol === 'javascript:').length") == 0
    browser.screenshot(shots / "issue.png")

    follow(browser, "header a")  # back to the index
    follow(browser, "a.dashboard")
    wait_for("the graph drawn", lambda: browser.evaluate("document.body.dataset.mermaid") or None)
    assert browser.evaluate("document.body.dataset.mermaid") == "drawn"
    assert browser.evaluate("document.querySelectorAll('pre.mermaid svg').length") == 1
    labels = str(browser.evaluate("document.querySelector('pre.mermaid svg').textContent"))
    assert "#1 working" in labels and "blocked by" in labels
    browser.screenshot(shots / "dashboard.png")
    # The dashboard's link to the issue leads to its page here.
    follow(browser, f'main a[href="/ui/{REPO}/issues/{site.issue}"]')
    assert sorted(p.name for p in shots.iterdir()) == ["dashboard.png", "index.png", "issue.png", "pull.png"]
