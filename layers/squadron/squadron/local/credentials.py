"""GitHub App credentials for ``squadron local`` against real GitHub (no sandbox).

Given by environment variables, or a YAML file (``squadron local --github-app FILE``)
whose keys are the same names in lower case without the prefix; the environment wins
over the file. None given: the local stack starts its GitHub sandbox.

=================================  =========================================================
``SQUADRON_GITHUB_APP_ID``         the App's numeric id (its settings page, "About")
``SQUADRON_GITHUB_PRIVATE_KEY_FILE``  the App's private key, a PEM file GitHub generated
``SQUADRON_GITHUB_WEBHOOK_SECRET``  the webhook secret set on the App
``SQUADRON_GITHUB_API_URL``        default https://api.github.com (GitHub Enterprise: its API)
``SQUADRON_GIT_REMOTE_TEMPLATE``   default https://github.com/{repo}.git for github.com
=================================  =========================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from squadron.errors import SquadronError

ENV = {
    "app_id": "SQUADRON_GITHUB_APP_ID",
    "private_key_file": "SQUADRON_GITHUB_PRIVATE_KEY_FILE",
    "webhook_secret": "SQUADRON_GITHUB_WEBHOOK_SECRET",
    "api_url": "SQUADRON_GITHUB_API_URL",
    "git_remote_template": "SQUADRON_GIT_REMOTE_TEMPLATE",
}
GITHUB_API = "https://api.github.com"


class CredentialsError(SquadronError):
    """The credentials are incomplete or wrong; the message says which and how to fix it."""


class GitHubAppCredentials(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    app_id: int = Field(gt=0)
    private_key_file: Path
    webhook_secret: SecretStr = Field(min_length=1)
    api_url: str = Field(
        default=GITHUB_API, pattern=r"^(https://|http://(127\.0\.0\.1|localhost)(:\d+)?(/|$))"
    )
    git_remote_template: str = ""

    @model_validator(mode="after")
    def _remote(self) -> GitHubAppCredentials:
        if not self.git_remote_template:
            if self.api_url.rstrip("/") != GITHUB_API:
                raise ValueError(
                    f"{ENV['git_remote_template']} is required with an API other than {GITHUB_API}"
                )
            object.__setattr__(self, "git_remote_template", "https://github.com/{repo}.git")
        elif "{repo}" not in self.git_remote_template:
            raise ValueError(f"{ENV['git_remote_template']} must contain {{repo}} (owner/name)")
        return self

    def private_key(self) -> str:
        """The PEM text, checked to be an RSA private key (what GitHub generates for Apps)."""
        from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: PLC0415
        from cryptography.hazmat.primitives.serialization import load_pem_private_key  # noqa: PLC0415

        try:
            pem = self.private_key_file.read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError) as exc:
            raise CredentialsError(
                f"{self.private_key_file}: cannot read the App's private key ({exc})"
            ) from exc
        try:
            key = load_pem_private_key(pem.encode(), password=None)
        except (ValueError, TypeError) as exc:
            raise CredentialsError(
                f"{self.private_key_file}: not a PEM private key; download one from the App's settings "
                "(Private keys -> Generate a private key)"
            ) from exc
        if not isinstance(key, rsa.RSAPrivateKey):
            raise CredentialsError(f"{self.private_key_file}: GitHub App keys are RSA keys")
        return pem


def load_credentials(env: Mapping[str, str], file: Path | None = None) -> GitHubAppCredentials | None:
    """The credentials the environment and ``file`` give, None when neither gives any."""
    values: dict[str, Any] = {}
    if file is not None:
        try:
            loaded = yaml.safe_load(file.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise CredentialsError(f"{file}: cannot read the credentials file ({exc})") from exc
        if not isinstance(loaded, dict):
            raise CredentialsError(f"{file}: expected a mapping of {', '.join(ENV)}")
        values.update(loaded)
    values.update({key: env[name] for key, name in ENV.items() if env.get(name)})
    if not values:
        return None
    try:
        credentials = GitHubAppCredentials.model_validate(values)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            where = str(error["loc"][0]) if error["loc"] else ""
            name = ENV.get(where, where)
            message = str(error["msg"]).removeprefix("Value error, ")
            problems.append(f"{name}: {message}" if name else message)
        source = f" (from {file} and the environment)" if file else ""
        raise CredentialsError("GitHub App credentials" + source + ": " + "; ".join(problems)) from exc
    credentials.private_key()  # fails now, with the file named, rather than at the first webhook
    return credentials
