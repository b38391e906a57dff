"""Finding secrets in an agent's writes: kinds and places only, within bounds."""

from __future__ import annotations

import pytest

from squadron.adapters.secret_scan import find_secrets
from squadron.domain.threats import MAX_LINE_CHARS, MAX_SCAN_CHARS, Finding, added_lines, refusal

AWS_KEY = "AKIA" + "QYLPMN5HFJ3XWZ7T"
PAT = "ghp_" + "x7Kq2Lm9Np4Rs8Tv1Wy3Za6Bc5De0Fg2Hj4K"
PEM = "-----BEGIN RSA " + "PRIVATE KEY-----"

TEXTS: list[tuple[str, str, list[Finding]]] = [
    # (case, the body, what is found)
    ("an AWS key", f"id={AWS_KEY}", [Finding("body", 1, "AWS Access Key")]),
    ("a GitHub token on line 3", f"a\nb\nGITHUB_TOKEN={PAT}", [Finding("body", 3, "GitHub Token")]),
    ("a private key", f"{PEM}\nMIIE...", [Finding("body", 1, "Private Key")]),
    (
        "a password in a URL",
        "https://admin:hunter2hunter2@db.example.com/x",
        [Finding("body", 1, "Basic Auth Credentials")],
    ),
    ("a commit SHA", "at 0123456789abcdef0123456789abcdef01234567", []),
    ("code reading a password", "password = os.environ['DB_PASSWORD']", []),
    ("plain words", "Fixed the parser.", []),
    ("past the line bound", "x" * MAX_LINE_CHARS + AWS_KEY, []),
    ("past the text bound", "\n" * MAX_SCAN_CHARS + AWS_KEY, []),
    # Scanned a block of lines at a time: each secret is still found on its own line.
    (
        "two secrets deep in a long text",
        "word\n" * 900 + f"id={AWS_KEY}\n" + "x = 1\n" * 2000 + f"t={PAT}\n" + "end\n" * 10,
        [Finding("body", 901, "AWS Access Key"), Finding("body", 2902, "GitHub Token")],
    ),
    (
        "a secret split over two lines is not one",
        "AKIA\n" + AWS_KEY[4:] + "\nhttps://admin:\nhunter2@db.example.com",
        [],
    ),
    (
        "secrets on neighbouring lines",
        f"https://admin:hunter2hunter2@db.example.com/x\n{PEM}\n{AWS_KEY}",
        [
            Finding("body", 1, "Basic Auth Credentials"),
            Finding("body", 2, "Private Key"),
            Finding("body", 3, "AWS Access Key"),
        ],
    ),
    ("a quarter million short lines", "ab\n" * (MAX_SCAN_CHARS // 3), []),
]


@pytest.mark.parametrize(("text", "found"), [c[1:] for c in TEXTS], ids=[c[0] for c in TEXTS])
def test_secrets_are_found_by_kind_and_place(text: str, found: list[Finding]) -> None:
    assert find_secrets([("body", text)]) == found


def test_what_the_agent_is_told_never_holds_the_secret() -> None:
    findings = find_secrets([("title", f"key {AWS_KEY}"), ("body", f"t {PAT}")])
    said = refusal(findings)
    assert AWS_KEY not in said and PAT not in said
    assert "AWS Access Key in the title, line 1" in said and "GitHub Token in the body, line 1" in said


DIFF = """diff --git a/deploy.sh b/deploy.sh
new file mode 100644
--- /dev/null
+++ b/deploy.sh
@@ -0,0 +1,2 @@
+#!/bin/sh
+export KEY=1
diff --git a/app.py b/app.py
--- a/app.py
+++ b/app.py
@@ -3 +3 @@ def main():
-print('v1')
+print('v2')
@@ -10,0 +11,2 @@
+a = 1
+b = 2
"""


def test_the_lines_a_diff_adds_with_their_files_and_numbers() -> None:
    assert list(added_lines(DIFF)) == [
        ("deploy.sh", 1, "#!/bin/sh"),
        ("deploy.sh", 2, "export KEY=1"),
        ("app.py", 3, "print('v2')"),
        ("app.py", 11, "a = 1"),
        ("app.py", 12, "b = 2"),
    ]
