"""Real GitHub App credentials for `squadron local`: complete and checked, or a precise error."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from squadron.local.credentials import CredentialsError, load_credentials
from tests.support.github_fake import app_private_key

PRIVATE, _ = app_private_key()


@pytest.fixture
def key(tmp_path: Path) -> Path:
    path = tmp_path / "app.pem"
    path.write_text(PRIVATE)
    return path


def env_for(key: Path, **changes: str | None) -> dict[str, str]:
    values: dict[str, str | None] = {
        "SQUADRON_GITHUB_APP_ID": "123456",
        "SQUADRON_GITHUB_PRIVATE_KEY_FILE": str(key),
        "SQUADRON_GITHUB_WEBHOOK_SECRET": "s3cret",
        **changes,
    }
    return {name: value for name, value in values.items() if value is not None}


def test_no_credentials_means_the_sandbox() -> None:
    assert load_credentials({"HOME": "/root"}) is None


def test_complete_credentials_for_github_com(key: Path) -> None:
    credentials = load_credentials(env_for(key))
    assert credentials is not None
    assert (credentials.app_id, credentials.api_url) == (123456, "https://api.github.com")
    assert credentials.git_remote_template == "https://github.com/{repo}.git"
    assert credentials.private_key() == PRIVATE
    assert "s3cret" not in repr(credentials)  # the secret never prints


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"SQUADRON_GITHUB_WEBHOOK_SECRET": None}, "SQUADRON_GITHUB_WEBHOOK_SECRET: Field required"),
        ({"SQUADRON_GITHUB_APP_ID": "squadron"}, "SQUADRON_GITHUB_APP_ID: Input should be a valid integer"),
        ({"SQUADRON_GITHUB_APP_ID": "0"}, "SQUADRON_GITHUB_APP_ID: Input should be greater than 0"),
        (
            {"SQUADRON_GITHUB_API_URL": "http://github.example"},
            "SQUADRON_GITHUB_API_URL: String should match",
        ),
        (
            {"SQUADRON_GITHUB_API_URL": "https://ghe.example/api/v3"},
            "SQUADRON_GIT_REMOTE_TEMPLATE is required with an API other than https://api.github.com",
        ),
        (
            {"SQUADRON_GIT_REMOTE_TEMPLATE": "https://github.com/octo/demo.git"},
            "SQUADRON_GIT_REMOTE_TEMPLATE must contain {repo}",
        ),
        ({"SQUADRON_GITHUB_PRIVATE_KEY_FILE": "/nowhere/app.pem"}, "/nowhere/app.pem: cannot read"),
    ],
)
def test_incomplete_or_wrong_credentials_are_named(
    key: Path, changes: dict[str, str | None], message: str
) -> None:
    with pytest.raises(CredentialsError) as caught:
        load_credentials(env_for(key, **changes))
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not a key\n", "not a PEM private key"),
        (
            ec.generate_private_key(ec.SECP256R1())
            .private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
            .decode(),
            "GitHub App keys are RSA keys",
        ),
    ],
)
def test_a_key_file_that_is_no_app_key_is_refused(tmp_path: Path, content: str, message: str) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text(content)
    with pytest.raises(CredentialsError, match=message):
        load_credentials(env_for(bad))


def test_a_file_gives_them_and_the_environment_wins(tmp_path: Path, key: Path) -> None:
    file = tmp_path / "github-app.yaml"
    file.write_text(f"app_id: 1\nprivate_key_file: {key}\nwebhook_secret: from-file\n")
    credentials = load_credentials({"SQUADRON_GITHUB_APP_ID": "99"}, file)
    assert credentials is not None
    assert (credentials.app_id, credentials.webhook_secret.get_secret_value()) == (99, "from-file")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("- app_id\n", "expected a mapping"),
        ("app_id: 1\nprivate_key: inline\n", "private_key: Extra inputs are not permitted"),
        ("app_id: [1\n", "cannot read the credentials file"),
    ],
)
def test_a_bad_credentials_file_is_named(tmp_path: Path, content: str, message: str) -> None:
    file = tmp_path / "github-app.yaml"
    file.write_text(content)
    with pytest.raises(CredentialsError) as caught:
        load_credentials({}, file)
    assert message in str(caught.value) and str(file) in str(caught.value)
