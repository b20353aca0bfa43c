"""Gateway agents push load reports and heartbeats here."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response, status

from supergw_controller.api.deps import CoreDep, GatewayName
from supergw_proto.reports import GatewayReport, Heartbeat

router = APIRouter(prefix="/gateways", tags=["agents"])


def _same_gateway(path_name: str, body_name: str) -> None:
    if path_name != body_name:
        raise HTTPException(
            422,
            f"body.gateway: {body_name!r} does not match the gateway in the path {path_name!r}",
        )


@router.post("/{name}/report", status_code=204, response_class=Response, summary="Agent load report (every T_L)")
async def post_report(core: CoreDep, name: GatewayName, report: GatewayReport) -> Response:
    _same_gateway(name, report.gateway)
    await core.accept_report(report)
    return Response(status_code=204)


@router.post("/{name}/heartbeat", status_code=204, response_class=Response, summary="Agent liveness beacon")
async def post_heartbeat(core: CoreDep, name: GatewayName, hb: Heartbeat) -> Response:
    _same_gateway(name, hb.gateway)
    await core.accept_heartbeat(hb)
    return Response(status_code=204)
