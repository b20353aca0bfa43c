"""Bearer-token check for every route under /api/v1."""

from __future__ import annotations

import hmac

from fastapi import HTTPException, status

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="supergw"'}


def check_bearer(authorization: str | None, token: str) -> None:
    """Raise 401 unless `authorization` is exactly ``Bearer <token>``."""
    if not authorization:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing bearer token: send 'Authorization: Bearer <token>'",
            headers=_CHALLENGE,
        )
    scheme, _, given = authorization.partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            f"unsupported authorization scheme {scheme!r}: send 'Authorization: Bearer <token>'",
            headers=_CHALLENGE,
        )
    if not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "invalid bearer token", headers=_CHALLENGE)
