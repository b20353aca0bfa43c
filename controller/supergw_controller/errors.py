"""Errors the core raises to its callers (the REST layer maps them to HTTP statuses)."""

from __future__ import annotations


class CoreError(Exception):
    """Base of every error the core raises on a bad request or an unavailable switch."""


class UnknownGateway(CoreError):
    """No gateway with that name in the config (HTTP 404)."""


class UnknownBucket(CoreError):
    """Bucket index outside 0..K-1 (HTTP 404)."""


class Conflict(CoreError):
    """The request contradicts current state, e.g. pin to a drained or dead gateway (HTTP 409)."""


class InvalidArgument(CoreError):
    """A value the core refuses, e.g. a weight <= 0 (HTTP 400/422)."""


class NotPrimary(CoreError):
    """This controller instance is a backup; it does not write (HTTP 503)."""


class SwitchUnavailable(CoreError):
    """The switch is not connected or a write failed (HTTP 503); nothing was changed."""
