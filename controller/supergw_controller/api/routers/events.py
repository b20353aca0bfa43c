from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from supergw_controller.api.deps import CoreDep
from supergw_controller.api.responses import errors
from supergw_proto.api import EventView

router = APIRouter(tags=["events"])


@router.get("/events", response_model=list[EventView], summary="Recent events (bucket moves, gateway state), newest first",
            responses=errors(422))
async def list_events(
    core: CoreDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    since_id: Annotated[int, Query(ge=0, description="only events with a larger id")] = 0,
) -> list[EventView]:
    return await core.events(limit=limit, since_id=since_id)
