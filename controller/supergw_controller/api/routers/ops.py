"""Operational routes: liveness and Prometheus metrics (open unless `api.ops_token_required`)."""

from __future__ import annotations

import asyncio
import dataclasses

from fastapi import APIRouter, Response

from supergw_controller.api.deps import State
from supergw_controller.api.responses import errors
from supergw_proto.api import HaHealth, Health, ReplicaHealth
from supergw_controller.errors import CoreError
from supergw_controller.ha.view import HaAware
from supergw_controller.api.core import Core
from supergw_controller.metrics import CONTENT_TYPE, ControllerMetrics, Snapshot

router = APIRouter(tags=["operations"], responses=errors(401, 403, when=" (only with `api.ops_token_required: true`)"))


@router.get(
    "/healthz",
    response_model=Health | ReplicaHealth,
    summary="Liveness: 200 while the process answers; a replica adds its HA role and the leader",
)
async def healthz(state: State) -> Health:
    try:
        s = await state.core.status()
    except CoreError as exc:
        return Health(status="degraded", detail=str(exc))
    if isinstance(state.core, HaAware):
        ha = HaHealth(**dataclasses.asdict(state.core.ha_status()))
        return ReplicaHealth(status="ok", role=s.role, connected=s.connected, ha=ha)
    return Health(status="ok", role=s.role, connected=s.connected)


@router.get("/metrics", response_class=Response, summary="Prometheus exposition (text format 0.0.4)")
async def metrics(state: State) -> Response:
    return Response(await exposition(state.core, state.metrics), media_type=CONTENT_TYPE)


async def exposition(core: Core, metrics: ControllerMetrics) -> bytes:
    """The core's state now in Prometheus text, rendered in a worker thread (see
    `ControllerMetrics.render_from`): the event loop goes on meanwhile."""
    status, gateways, buckets = await asyncio.gather(core.status(), core.gateways(), core.bucket_traffic())
    snapshot = Snapshot(status, gateways, buckets, asyncio_tasks=len(asyncio.all_tasks()))
    return await asyncio.to_thread(metrics.render_from, snapshot)
