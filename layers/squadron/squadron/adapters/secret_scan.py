"""Secrets in text, found with detect-secrets (Yelp's maintained scanner) within the bounds of
:mod:`squadron.domain.threats`.

Only the detectors of credentials with a recognisable shape are used (cloud and API keys,
tokens, private keys, passwords in URLs); the entropy and keyword detectors are left out: they
flag commit SHAs and ordinary code, and a write refused for nothing is a write lost.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from detect_secrets.core.scan import scan_line
from detect_secrets.settings import transient_settings

from squadron.domain.threats import Finding, added_lines, scanned_lines

DETECTORS = (
    "ArtifactoryDetector",
    "AWSKeyDetector",
    "AzureStorageKeyDetector",
    "BasicAuthDetector",
    "CloudantDetector",
    "DiscordBotTokenDetector",
    "GitHubTokenDetector",
    "GitLabTokenDetector",
    "IbmCloudIamDetector",
    "IbmCosHmacDetector",
    "JwtTokenDetector",
    "MailchimpDetector",
    "NpmDetector",
    "OpenAIDetector",
    "PrivateKeyDetector",
    "PypiTokenDetector",
    "SendGridDetector",
    "SlackDetector",
    "SoftlayerDetector",
    "SquareOAuthDetector",
    "StripeDetector",
    "TelegramBotTokenDetector",
    "TwilioKeyDetector",
)
_SETTINGS = {"plugins_used": [{"name": name} for name in DETECTORS], "filters_used": []}


#: Lines are scanned in blocks of at most this many characters: a call of the scanner costs
#: about 0.1 ms whatever its length, so a text of many short lines (a quarter million blank ones)
#: took half a minute one line at a time. A block with a finding is scanned again line by line
#: for the place: no detector's pattern crosses a line (their anchors accept a newline as the
#: separator they need), so a block finds whatever its lines find.
BLOCK_CHARS = 4_096


def _blocks(lines: Iterable[tuple[str, int, str]]) -> Iterator[list[tuple[str, int, str]]]:
    block: list[tuple[str, int, str]] = []
    size = 0
    for field, number, line in lines:
        if not line.strip():
            continue  # nothing to find in whitespace
        if block and (size + len(line) + 1 > BLOCK_CHARS or block[0][0] != field):
            yield block
            block, size = [], 0
        block.append((field, number, line))
        size += len(line) + 1
    if block:
        yield block


def _found(lines: Iterable[tuple[str, int, str]]) -> list[Finding]:
    found: list[Finding] = []
    with transient_settings(_SETTINGS):
        for block in _blocks(lines):
            if len(block) > 1 and not any(True for _ in scan_line("\n".join(line for _, _, line in block))):
                continue
            for field, number, line in block:
                found += [Finding(field, number, str(secret.type)) for secret in scan_line(line)]
    return sorted(set(found))


def find_secrets(texts: Iterable[tuple[str, str]]) -> list[Finding]:
    """The secrets in each named text (its field), by kind and line: never their values."""
    return _found((field, number, line) for field, text in texts for number, line in scanned_lines(text))


def find_secrets_in_diff(diff: str) -> list[Finding]:
    """The secrets in the lines a unified diff adds, by file, line and kind."""
    return _found(added_lines(diff))
