from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from supergw_controller.api.deps import CoreDep
from supergw_controller.views import RebalanceView

router = APIRouter(tags=["rebalance"])


@router.post("/rebalance", response_model=RebalanceView, summary="Run one rebalance round now (dry_run: plan only)")
async def rebalance(
    core: CoreDep,
    dry_run: Annotated[bool, Query(description="true: return the planned moves without writing them")] = False,
) -> RebalanceView:
    return await core.rebalance(dry_run=dry_run)
