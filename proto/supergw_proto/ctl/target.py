"""Which controller to talk to, with which token and which TLS trust: options first, then
the environment, then the default (the controller on this box)."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from supergw_proto.rest import read_token, trust

DEFAULT_URL = "http://127.0.0.1:8080"
ENV_URL = "SUPERGW_URL"
ENV_TOKEN = "SUPERGW_TOKEN"
ENV_TOKEN_FILE = "SUPERGW_TOKEN_FILE"
ENV_CA_FILE = "SUPERGW_CA_FILE"


class UsageError(Exception):
    """The command line or the environment is wrong: nothing was sent."""


@dataclass(frozen=True)
class Target:
    url: str
    token: str
    verify: bool | ssl.SSLContext

    def __repr__(self) -> str:  # never the token
        return f"Target(url={self.url!r})"


def controller_url(option: str | None, env: Mapping[str, str]) -> str:
    url = option or env.get(ENV_URL) or DEFAULT_URL
    source = "--url" if option else (ENV_URL if env.get(ENV_URL) else "the default")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{source}: {url!r} is not a controller URL: expected http://HOST:PORT or https://HOST:PORT")
    if parts.path.rstrip("/"):
        raise UsageError(f"{source}: {url!r}: give the controller's base URL without a path (not .../api/v1)")
    return url.rstrip("/")


def api_token(option: Path | None, env: Mapping[str, str]) -> str:
    """The operator token: `--token-file`, else $SUPERGW_TOKEN_FILE, else $SUPERGW_TOKEN.
    There is no option carrying the token itself: it would show in `ps` and the history."""
    try:
        if option is not None:
            return read_token(option)
        file, secret = env.get(ENV_TOKEN_FILE), env.get(ENV_TOKEN)
        if file and secret:
            raise UsageError(f"both {ENV_TOKEN_FILE} and {ENV_TOKEN} are set: unset one")
        if file:
            return read_token(Path(file))
        if secret and secret.strip():
            return secret.strip()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    raise UsageError(
        f"no API token: pass --token-file FILE or set {ENV_TOKEN_FILE} (or {ENV_TOKEN}); "
        "on the controller box the operator's token is in /etc/supergw/controller/"
    )


def tls_trust(url: str, option: Path | None, env: Mapping[str, str]) -> bool | ssl.SSLContext:
    """The CA that signed the controller's certificate (`--ca-file`, $SUPERGW_CA_FILE), else
    the system's trust store."""
    ca = option if option is not None else (Path(env[ENV_CA_FILE]) if env.get(ENV_CA_FILE) else None)
    if ca is None:
        return True
    if not url.startswith("https://"):
        raise UsageError(f"a CA file ({ca}) is given but {url} is not https://: use the controller's https URL")
    try:
        return trust(ca)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def resolve(url: str | None, token_file: Path | None, ca_file: Path | None, env: Mapping[str, str]) -> Target:
    base = controller_url(url, env)
    return Target(url=base, token=api_token(token_file, env), verify=tls_trust(base, ca_file, env))
