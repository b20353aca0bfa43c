"""The error answers each operation documents in the OpenAPI, with their bodies.

One place says which status means what, so every route lists exactly the codes it can
answer (a generated client and a conformance checker such as schemathesis rely on that).
"""

from __future__ import annotations

from typing import Any, TypeVar

from fastapi import Response
from pydantic import TypeAdapter

from supergw_proto.api import ErrorBody, ValidationErrorBody

T = TypeVar("T")

Responses = dict[int | str, dict[str, Any]]

_WHY: dict[int, str] = {
    400: "the body could not be read as JSON text at all (e.g. it is not UTF-8)",
    401: "missing, malformed or unknown bearer token (with `WWW-Authenticate: Bearer`)",
    403: "a known token without the right for this operation (the message names the right it lacks)",
    404: "no such gateway or bucket (the message lists the known gateways or the bucket range)",
    409: "the request contradicts current state: the gateway is drained or dead, or the bucket is pinned elsewhere",
    422: "the request does not match the schema, or the core refuses a value; `errors` names each field",
    503: "this controller is a backup, or the switch or the intent store is unreachable; "
    "nothing was changed, retry (`Retry-After: 1`)",
}


def errors(*codes: int, when: str = "") -> Responses:
    """`responses=` for a route or router: each code with its description and body model;
    `when` says under which condition the codes occur at all."""
    return {
        code: {"description": _WHY[code] + when, "model": ValidationErrorBody if code == 422 else ErrorBody}
        for code in codes
    }


# Every /api/v1 route: the middleware's token check.
AUTH = errors(401, 403)
# A write the core carries out: it may be refused for its arguments or its moment.
WRITE = errors(422, 503)
# A route that reads a JSON body.
BODY = errors(400, 422)


def json_response(adapter: TypeAdapter[T], value: T) -> Response:
    """`value` (already a validated model: the core built it) as the answer, serialized once.
    FastAPI validates and serializes a route's return value against its `response_model` on
    the way out, which for a large answer (4,096 buckets, a page of 5,000 hosts) cost more than
    building it; the route keeps `response_model` for the OpenAPI."""
    return Response(adapter.dump_json(value), media_type="application/json")
