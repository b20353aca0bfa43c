"""Gateway agents push load reports and heartbeats here; the answer tells them the timing.

Every 204 carries the controller's `AgentTiming` (heartbeat interval, miss count, report
interval) in the `Supergw-Timing` header: the agent adopts it at once, so the controller's
`timing:` is the one source of the agents' cadence. While the controller asks something of
that gateway's agent (`AgentOrders`: redirect its remote-access clients while drained) the
answer also carries `Supergw-Orders`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Response

from supergw_controller.api.core import Core
from supergw_controller.api.deps import ApiState, CoreDep, GatewayName, State
from supergw_controller.api.responses import BODY, errors
from supergw_proto.reports import ORDERS_HEADER, TIMING_HEADER, GatewayReport, Heartbeat

router = APIRouter(prefix="/gateways", tags=["agents"])

_TIMING_DOC: dict[int | str, dict[str, Any]] = errors(404) | BODY | {
    204: {
        "description": "Successful Response",
        "headers": {
            TIMING_HEADER: {
                "description": "the controller's agent timing as compact JSON "
                "(`{\"heartbeat_interval_ms\": 100, \"missed_heartbeats\": 3, \"report_interval_ms\": 500}`): "
                "the agent adopts it at once",
                "schema": {"type": "string"},
            },
            ORDERS_HEADER: {
                "description": "what the controller asks of this gateway's agent now, as compact JSON "
                "(`{\"redirect_to\": \"203.0.113.1\"}`: redirect its remote-access clients there); "
                "absent: nothing",
                "schema": {"type": "string"},
            },
        },
    }
}


def _told(state: ApiState, core: Core, name: str) -> Response:
    """The 204 an agent gets: with the controller's timing, which it adopts at once, and
    what the controller asks of it now, if anything."""
    headers = {TIMING_HEADER: state.agent_timing}
    orders = core.agent_orders(name)
    if not orders.empty:
        headers[ORDERS_HEADER] = orders.header()
    return Response(status_code=204, headers=headers)


def _same_gateway(path_name: str, body_name: str) -> None:
    """403, not 422: the body is schema-valid, but the caller (the agent of the gateway in the
    path) may not speak for another gateway."""
    if path_name != body_name:
        raise HTTPException(
            403,
            f"body.gateway: {body_name!r} is not the gateway in the path {path_name!r}; "
            f"the agent of {path_name!r} may report and heartbeat only for {path_name!r}",
        )


@router.post("/{name}/report", status_code=204, response_class=Response, responses=_TIMING_DOC,
             summary="Agent load report (every T_L)")
async def post_report(core: CoreDep, state: State, name: GatewayName, report: GatewayReport) -> Response:
    _same_gateway(name, report.gateway)
    await core.accept_report(report)
    return _told(state, core, name)


@router.post("/{name}/heartbeat", status_code=204, response_class=Response, responses=_TIMING_DOC,
             summary="Agent liveness beacon")
async def post_heartbeat(core: CoreDep, state: State, name: GatewayName, hb: Heartbeat) -> Response:
    _same_gateway(name, hb.gateway)
    await core.accept_heartbeat(hb)
    return _told(state, core, name)
