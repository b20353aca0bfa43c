from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from supergw_controller.api.audit import audited
from supergw_controller.api.deps import Caller, CoreDep
from supergw_controller.api.responses import WRITE
from supergw_proto.api import RebalanceView

router = APIRouter(tags=["rebalance"])


@router.post("/rebalance", response_model=RebalanceView, summary="Run one rebalance round now (dry_run: plan only)",
             responses=WRITE)
async def rebalance(
    core: CoreDep,
    caller: Caller,
    dry_run: Annotated[bool, Query(description="true: return the planned moves without writing them")] = False,
) -> RebalanceView:
    def describe(r: RebalanceView) -> str:
        return f"{'planned' if r.dry_run else 'moved'} {len(r.moves)} buckets"

    return await audited(core, caller, "rebalance-dry-run" if dry_run else "rebalance", core.rebalance(dry_run=dry_run), describe=describe)
