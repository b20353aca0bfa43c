"""Who is calling (authentication) and may they (authorization), for every /api/v1 route.

Three kinds of caller, each with its own bearer token from the config:
- an operator with role `read-only`: every GET;
- an operator with role `admin`: everything an operator can do;
- the agent of one gateway: POST its own report and heartbeat, GET its own orders, nothing else.
A missing or unknown token is 401; a known token outside its rights is 403 naming the
right it lacks. Secrets are compared in constant time and never leave this module.

Token files are watched: when one changes (inode, mtime or size), every file is read again
and the new tokens replace the old ones in one step, so a rotated token works (and the old
one stops) without a restart. A gateway's previous agent token keeps working for
`heartbeats.key_overlap_s` after its rotation, as its heartbeat key does (`heartbeat_keys`):
the agent's copy is rotated on another host, a little later, and its REST heartbeats and
reports must not fail meanwhile. An operator token stops at once. A file that cannot be used
leaves the last good tokens in force and logs why, once per change.
"""

from __future__ import annotations

import hmac
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Protocol

from fastapi import HTTPException, status

from supergw_controller.config import ConfigError, Role
from supergw_controller.secretfiles import stamps

log = logging.getLogger(__name__)

CHALLENGE = {"WWW-Authenticate": 'Bearer realm="supergw"'}


class Access(Enum):
    """What a route needs."""

    READ = "read"  # operator, role read-only or admin
    ADMIN = "admin"  # operator, role admin
    AGENT = "agent"  # the agent of the gateway named in the path


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: an operator (`role` set) or a gateway's agent (`gateway` set)."""

    name: str
    role: Role | None = None
    gateway: str | None = None

    @property
    def who(self) -> str:
        """How the event log names the caller (never the token)."""
        return f"agent:{self.gateway}" if self.gateway is not None else self.name


# Structural type of what `from_config` reads, so tests can pass a Config or a look-alike.
class _ApiTokens(Protocol):
    def operator_tokens(self) -> list[tuple[str, Role, str]]: ...


class _GatewaySecret(Protocol):
    @property
    def name(self) -> str: ...
    def agent_secret(self) -> str | None: ...


class _Overlap(Protocol):
    @property
    def key_overlap_s(self) -> float: ...


class _AuthConfig(Protocol):
    @property
    def api(self) -> _ApiTokens: ...
    @property
    def heartbeats(self) -> _Overlap: ...
    @property
    def gateways(self) -> Sequence[_GatewaySecret]: ...
    def secret_files(self) -> list[Path]: ...
    def with_secrets_reread(self) -> _AuthConfig: ...


Entries = tuple[tuple[bytes, Principal], ...]

def _entries(pairs: Iterable[tuple[str, Principal]]) -> Entries:
    out: list[tuple[bytes, Principal]] = []
    for secret, principal in pairs:
        key = secret.encode()
        if any(hmac.compare_digest(key, k) for k, _ in out):
            raise ValueError(f"{principal.who}: its token is also another principal's token")
        out.append((key, principal))
    return tuple(out)


def _principals(config: _AuthConfig) -> list[tuple[str, Principal]]:
    pairs = [(secret, Principal(name, role=role)) for name, role, secret in config.api.operator_tokens()]
    for gw in config.gateways:
        secret = gw.agent_secret()
        if secret is not None:
            pairs.append((secret, Principal(gw.name, gateway=gw.name)))
    return pairs


class Authenticator:
    """Maps a bearer token to its principal. From the config, it follows the token files."""

    def __init__(self, entries: Iterable[tuple[str, Principal]], config: _AuthConfig | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._entries = _entries(entries)
        self._config = config
        self._files = tuple(config.secret_files()) if config is not None else ()
        self._stamps = stamps(self._files)
        self._reloading = threading.Lock()
        self._clock = clock
        self._retiring: tuple[tuple[bytes, Principal, float], ...] = ()  # previous agent tokens, until when

    @classmethod
    def from_config(cls, config: _AuthConfig) -> Authenticator:
        return cls(_principals(config), config)

    def _current(self) -> Entries:
        """The tokens in force, after re-reading the token files if one changed."""
        if not self._files or stamps(self._files) == self._stamps:
            return self._entries
        with self._reloading:
            # Stamped before reading: a write that lands during the read changes the stamp again.
            now = stamps(self._files)
            if now != self._stamps and self._config is not None:
                self._stamps = now  # one attempt (and one error) per change, not per request
                try:
                    config = self._config.with_secrets_reread()
                    entries = _entries(_principals(config))
                except (ConfigError, ValueError) as exc:
                    log.error(
                        "API tokens NOT reloaded, the tokens read before stay in force: %s "
                        "(fix the file; it is read again when it changes)", exc,
                    )
                else:
                    self._retiring = self._retire(self._entries, entries, config.heartbeats.key_overlap_s)
                    self._config, self._entries = config, entries
                    log.warning("API tokens reloaded from %d token file(s)", len(self._files))
        return self._entries

    def _retire(self, old: Entries, new: Entries, overlap_s: float) -> tuple[tuple[bytes, Principal, float], ...]:
        """The previous agent tokens still accepted: those replaced now, for `overlap_s`, and
        those replaced before whose overlap lasts. Never one that is now another's token."""
        now = self._clock()
        current = {p.gateway: k for k, p in new if p.gateway is not None}
        out = [r for r in self._retiring if r[2] > now]
        for key, p in old:
            if p.gateway is not None and current.get(p.gateway) not in (None, key) and overlap_s > 0:
                out.append((key, p, now + overlap_s))
                log.warning("gateway %s: agent token rotated; the previous one is accepted for %gs more "
                            "(heartbeats.key_overlap_s) while its agent picks up the new one", p.gateway, overlap_s)
        return tuple(r for r in out if not any(hmac.compare_digest(r[0], k) for k, _ in new))

    def lookup(self, token: str) -> Principal | None:
        given = token.encode()
        found = None
        for key, principal in self._current():  # no early exit: the time does not tell which entry matched
            if hmac.compare_digest(given, key):
                found = principal
        now = self._clock()
        for key, principal, until in self._retiring:
            if hmac.compare_digest(given, key) and now < until and found is None:
                found = principal
        return found

    def authenticate(self, authorization: str | None) -> Principal:
        """The caller behind an ``Authorization`` header value, or 401."""
        if not authorization:
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED,
                "missing bearer token: send 'Authorization: Bearer <token>'",
                headers=CHALLENGE,
            )
        scheme, _, given = authorization.partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED,
                f"unsupported authorization scheme {scheme!r}: send 'Authorization: Bearer <token>'",
                headers=CHALLENGE,
            )
        principal = self.lookup(given.strip())
        if principal is None:
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED,
                "invalid bearer token: it is neither an operator token nor a gateway agent token of this controller",
                headers=CHALLENGE,
            )
        return principal


def authorize(principal: Principal, access: Access, gateway: str | None = None) -> None:
    """403 unless `principal` may use a route that needs `access` (for AGENT: of `gateway`)."""
    if access is Access.AGENT:
        if principal.gateway is None:
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                f"only the agent of gateway {gateway!r} may post its reports and heartbeats (and read its orders); "
                f"operator token {principal.name!r} cannot",
            )
        if principal.gateway != gateway:
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                f"the agent token of gateway {principal.gateway!r} may report and heartbeat only for "
                f"{principal.gateway!r}, not for {gateway!r}",
            )
        return
    if principal.gateway is not None:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            f"the agent token of gateway {principal.gateway!r} cannot call operator routes "
            f"(needs an operator token with role {_role_for(access)!r})",
        )
    if access is Access.ADMIN and principal.role is not Role.ADMIN:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            f"operator {principal.name!r} has role {principal.role}; this action needs role 'admin'",
        )


def _role_for(access: Access) -> str:
    return Role.ADMIN.value if access is Access.ADMIN else Role.READ_ONLY.value


def access_for(method: str, agent_route: bool) -> Access:
    """The one policy: agent routes need their agent; reads need any operator; writes need an admin."""
    if agent_route:
        return Access.AGENT
    return Access.READ if method in ("GET", "HEAD", "OPTIONS") else Access.ADMIN
