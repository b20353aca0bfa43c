from __future__ import annotations

from fastapi import APIRouter

from supergw_controller.api.deps import CoreDep
from supergw_proto.api import StatusView

router = APIRouter(tags=["status"])


@router.get("/status", response_model=StatusView, summary="Controller, switch and cluster summary")
async def get_status(core: CoreDep) -> StatusView:
    return await core.status()
