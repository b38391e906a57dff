"""Secrets in text, found with detect-secrets (Yelp's maintained scanner) within the bounds of
:mod:`squadron.domain.threats`.

Only the detectors of credentials with a recognisable shape are used (cloud and API keys,
tokens, private keys, passwords in URLs); the entropy and keyword detectors are left out: they
flag commit SHAs and ordinary code, and a write refused for nothing is a write lost.
"""

from __future__ import annotations

from collections.abc import Iterable

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


def _found(lines: Iterable[tuple[str, int, str]]) -> list[Finding]:
    found: list[Finding] = []
    with transient_settings(_SETTINGS):
        for field, number, line in lines:
            found += [Finding(field, number, str(secret.type)) for secret in scan_line(line)]
    return sorted(set(found))


def find_secrets(texts: Iterable[tuple[str, str]]) -> list[Finding]:
    """The secrets in each named text (its field), by kind and line: never their values."""
    return _found((field, number, line) for field, text in texts for number, line in scanned_lines(text))


def find_secrets_in_diff(diff: str) -> list[Finding]:
    """The secrets in the lines a unified diff adds, by file, line and kind."""
    return _found(added_lines(diff))
