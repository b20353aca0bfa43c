from __future__ import annotations

from fastapi import APIRouter

from supergw_controller.api.deps import CoreDep
from supergw_proto.api import ClientView

router = APIRouter(tags=["clients"])


@router.get(
    "/clients",
    response_model=list[ClientView],
    summary="Remote-access clients (IKE SAs) per gateway, as the gateways report them, and whether each is pinned",
)
async def list_clients(core: CoreDep) -> list[ClientView]:
    return await core.clients()
