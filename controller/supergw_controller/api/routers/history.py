from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from supergw_controller.api.deps import CoreDep
from supergw_controller.api.responses import errors
from supergw_controller.history import DEFAULT_CAPACITY
from supergw_proto.api import HistoryView

router = APIRouter(tags=["history"])


@router.get(
    "/history",
    response_model=HistoryView,
    responses=errors(422),
    summary="Time series for the dashboard's plots (per-gateway throughput, CPU, buckets; failover and move markers)",
    description="One sample per `interval_s` (default 1 s) kept in memory, the last `capacity` of them "
    "(default 3600: one hour); lost on restart. Poll with `since` = the `ts` of the newest sample you have.",
)
async def get_history(
    core: CoreDep,
    since: Annotated[
        float | None,
        Query(ge=0, allow_inf_nan=False, description="UNIX time: only samples taken after it (default: all kept)"),
    ] = None,
    limit: Annotated[
        int, Query(ge=1, le=DEFAULT_CAPACITY, description="at most this many samples, the newest ones")
    ] = 600,
) -> HistoryView:
    return await core.history(since=since, limit=limit)
