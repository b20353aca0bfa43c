from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response, status
from pydantic import TypeAdapter

from supergw_controller.api.audit import audited
from supergw_controller.api.deps import ApiState, BucketIndex, Caller, CoreDep, State
from supergw_controller.api.responses import BODY, WRITE, errors, json_response
from supergw_proto.api import GatewayRef
from supergw_proto.api import BucketView

router = APIRouter(prefix="/buckets", tags=["buckets"])
BUCKETS = TypeAdapter(list[BucketView])


def _known(state: ApiState, ref: GatewayRef) -> str:
    if ref.gateway not in state.gateway_names:
        # 404 like an unknown gateway in the path: the body is schema-valid, the name refers to nothing
        raise HTTPException(status.HTTP_404_NOT_FOUND, "body.gateway: " + state.unknown_gateway(ref.gateway))
    return ref.gateway


@router.get("", response_model=list[BucketView], summary="The bucket map: all K buckets in index order")
async def list_buckets(core: CoreDep) -> Response:
    return json_response(BUCKETS, await core.buckets())


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
    gw = _known(state, body)
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
    gw = _known(state, body)
    return await audited(core, caller, "move", core.move(b, gw, "operator"), bucket=b, target=gw)
