from __future__ import annotations

from fastapi import APIRouter

from supergw_controller.api.audit import audited
from supergw_controller.api.deps import Caller, CoreDep, GatewayName
from supergw_controller.api.responses import BODY, WRITE, errors
from supergw_proto.api import WeightBody
from supergw_proto.api import GatewayView

router = APIRouter(prefix="/gateways", tags=["gateways"])


@router.get("", response_model=list[GatewayView], summary="All gateways with state, weight and load")
async def list_gateways(core: CoreDep) -> list[GatewayView]:
    return await core.gateways()


@router.get("/{name}", response_model=GatewayView, summary="One gateway", responses=errors(404, 422))
async def get_gateway(core: CoreDep, name: GatewayName) -> GatewayView:
    return await core.gateway(name)


@router.post(
    "/{name}/drain",
    response_model=GatewayView,
    responses=errors(404) | WRITE,
    summary="Drain: move all unpinned buckets away now; the gateway receives no new buckets",
)
async def drain(core: CoreDep, caller: Caller, name: GatewayName) -> GatewayView:
    return await audited(core, caller, "drain", core.drain(name), gateway=name)


@router.post(
    "/{name}/undrain",
    response_model=GatewayView,
    responses=errors(404) | WRITE,
    summary="Undrain: the gateway is eligible again and refilled gradually by rebalance rounds",
)
async def undrain(core: CoreDep, caller: Caller, name: GatewayName) -> GatewayView:
    return await audited(core, caller, "undrain", core.undrain(name), gateway=name)


@router.put("/{name}/weight", response_model=GatewayView, summary="Set the capacity weight (> 0)",
            responses=errors(404) | WRITE | BODY)
async def set_weight(core: CoreDep, caller: Caller, name: GatewayName, body: WeightBody) -> GatewayView:
    call = core.set_weight(name, body.weight)
    return await audited(core, caller, "weight", call, gateway=name, describe=lambda _: f"weight {body.weight:g}")
