from __future__ import annotations

import ipaddress
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError

from supergw_controller.api.deps import CoreDep, State
from supergw_controller.api.responses import errors, json_response
from supergw_proto.api import HOSTS_PAGE_DEFAULT, HOSTS_PAGE_MAX, MAC_PATTERN, HostPage, HostQuery

router = APIRouter(tags=["hosts"])
HOST_PAGE = TypeAdapter(HostPage)


@router.get(
    "/hosts",
    response_model=HostPage,
    responses=errors(404, 422),
    summary="Learned hosts with their bucket and gateway: one page, by MAC, filtered",
)
async def list_hosts(
    core: CoreDep,
    state: State,
    limit: Annotated[int, Query(ge=1, le=HOSTS_PAGE_MAX, description="hosts per page")] = HOSTS_PAGE_DEFAULT,
    after: Annotated[str | None, Query(pattern=MAC_PATTERN,
                                       description="a MAC: the page starts after it (the last page's next_after)")] = None,
    gateway: Annotated[str | None, Query(description="only hosts whose bucket this gateway holds")] = None,
    bucket: Annotated[int | None, Query(ge=0, description="only hosts of this bucket")] = None,
    port: Annotated[int | None, Query(ge=0, lt=1 << 16, description="only hosts on this switch port")] = None,
    ip: Annotated[ipaddress.IPv4Address | ipaddress.IPv6Address | None,
                  Query(description="the host with this IPv4 or IPv6 address")] = None,
    mac: Annotated[str | None, Query(pattern=MAC_PATTERN, description="the host with this MAC")] = None,
    learned: Annotated[bool | None, Query(description="false: hosts still waiting for an IPv4 source")] = None,
) -> Response:
    if gateway is not None:
        state.known_gateway(gateway, "query.gateway")
    if bucket is not None and bucket >= state.buckets:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"query.bucket: bucket {bucket} out of range 0..{state.buckets - 1}")
    try:
        query = HostQuery(limit=limit, after=after, gateway=gateway, bucket=bucket, port=port,
                          ip=None if ip is None else str(ip), mac=mac, learned=learned)
    except ValidationError as exc:  # a MAC or an IP address that is not one: a 422 naming the field
        raise RequestValidationError(
            [{"loc": ("query", *e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        ) from None
    return json_response(HOST_PAGE, await core.hosts(query))
