from __future__ import annotations

from fastapi import APIRouter

from supergw_controller.api.deps import CoreDep
from supergw_proto.api import HostView

router = APIRouter(tags=["hosts"])


@router.get("/hosts", response_model=list[HostView], summary="Learned hosts with their bucket and gateway")
async def list_hosts(core: CoreDep) -> list[HostView]:
    return await core.hosts()
