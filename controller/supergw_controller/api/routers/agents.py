"""Gateway agents push load reports and heartbeats here; the answer tells them the timing.

Every 204 carries the controller's `AgentTiming` (heartbeat interval, miss count, report
interval) in the `Supergw-Timing` header: the agent adopts it at once, so the controller's
`timing:` is the one source of the agents' cadence. While the controller asks something of
that gateway's agent (`AgentOrders`: redirect its remote-access clients while drained, its
replication orders) the answer also carries `Supergw-Orders`.

`GET /gateways/{name}/orders?after=N&wait=S` is the agent's long-poll for the same orders:
answered at once when the orders generation is above N, else as soon as it changes, else
after S seconds (at most 30) with the orders in force; a takeover order reaches the backup
within one round trip of the verdict.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Response

from supergw_controller.api.core import Core
from supergw_controller.api.deps import ApiState, CoreDep, GatewayName, State
from supergw_controller.api.responses import BODY, errors
from supergw_proto.reports import (
    ORDERS_GENERATION_HEADER,
    ORDERS_HEADER,
    TIMING_HEADER,
    AgentOrders,
    GatewayReport,
    Heartbeat,
)

MAX_WAIT_S = 30.0
DEFAULT_WAIT_S = 20.0

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


_ORDERS_DOC: dict[int | str, dict[str, Any]] = errors(404, 422) | {
    200: {
        "description": "The gateway's orders (`AgentOrders`; `replication.generation` is the generation in force)",
        "headers": {
            TIMING_HEADER: _TIMING_DOC[204]["headers"][TIMING_HEADER],
            ORDERS_GENERATION_HEADER: {
                "description": "the orders generation in force (also when `replication` is absent): the next `after`",
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


@router.get("/{name}/orders", response_model=AgentOrders, responses=_ORDERS_DOC,
            summary="Agent long-poll for its orders (answers when the generation passes `after`)")
async def get_orders(
    core: CoreDep,
    state: State,
    name: GatewayName,
    after: Annotated[int, Query(ge=0, le=(1 << 63) - 1,
                                description="the generation the agent has; answered at once when the one in force is above")] = 0,
    wait: Annotated[float, Query(ge=0, le=MAX_WAIT_S, allow_inf_nan=False,
                                 description="seconds to wait for a newer generation before answering anyway")] = DEFAULT_WAIT_S,
) -> Response:
    answer = await core.wait_orders(name, after, wait)
    return Response(
        content=answer.orders.model_dump_json(exclude_none=True),
        media_type="application/json",
        headers={TIMING_HEADER: state.agent_timing, ORDERS_GENERATION_HEADER: str(answer.generation)},
    )
