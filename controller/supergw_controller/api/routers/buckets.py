from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from supergw_controller.api.audit import audited
from supergw_controller.api.deps import BucketIndex, Caller, CoreDep, State
from supergw_controller.api.responses import BODY, WRITE, errors
from supergw_proto.api import BucketView, GatewayRef

router = APIRouter(prefix="/buckets", tags=["buckets"])


@router.get(
    "",
    response_model=list[BucketView],
    responses=errors(404, 422, when=" (only with a gateway filter: it names no gateway, or is no name at all)"),
    summary="The bucket map: all K buckets in index order, or only those one gateway holds",
)
async def list_buckets(
    core: CoreDep,
    state: State,
    gateway: Annotated[str | None, Query(min_length=1, max_length=64, description="only the buckets this gateway holds")] = None,
) -> Response:
    if gateway is not None:
        state.known_gateway(gateway, "query.gateway")
    # The core's body as it is: encoded once per change of the map, pins or counters (`bucket_list`).
    return Response(await core.buckets_json(gateway), media_type="application/json")


@router.get("/{b}", response_model=BucketView, summary="One bucket", responses=errors(404, 422))
async def get_bucket(core: CoreDep, b: BucketIndex) -> BucketView:
    return await core.bucket(b)


@router.post(
    "/{b}/pin",
    response_model=BucketView,
    responses=errors(404, 409) | WRITE | BODY,
    summary="Pin a bucket to a gateway (moves it there now; 409 if the gateway is drained or dead)",
)
async def pin(core: CoreDep, caller: Caller, state: State, b: BucketIndex, body: GatewayRef) -> BucketView:
    gw = state.known_gateway(body.gateway, "body.gateway")
    return await audited(core, caller, "pin", core.pin(b, gw), bucket=b, target=gw)


@router.delete("/{b}/pin", response_model=BucketView, summary="Unpin (no-op when not pinned)",
               responses=errors(404) | WRITE)
async def unpin(core: CoreDep, caller: Caller, b: BucketIndex) -> BucketView:
    return await audited(core, caller, "unpin", core.unpin(b), bucket=b)


@router.post(
    "/{b}/move",
    response_model=BucketView,
    responses=errors(404, 409) | WRITE | BODY,
    summary="Move a bucket once (reason 'operator'); 409 if pinned elsewhere or the gateway is drained/dead",
)
async def move(core: CoreDep, caller: Caller, state: State, b: BucketIndex, body: GatewayRef) -> BucketView:
    gw = state.known_gateway(body.gateway, "body.gateway")
    return await audited(core, caller, "move", core.move(b, gw, "operator"), bucket=b, target=gw)
