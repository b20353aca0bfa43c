"""A typed client of the controller's REST API (`/api/v1`, `/healthz`, `/metrics`).

Every route of the API has one method here returning the models of `supergw_proto.api`
(the API's own schemas), so the emulation, the benchmarks, the tests and the operator CLI
all read the same contract:

    with ControllerClient("http://10.255.60.2:8080", token=Path(".run/config/api-token")) as api:
        api.status().failovers_total
        api.move(5, "gw2").gateway

A refusal raises `ApiError` carrying the HTTP status and the API's own message (`detail`);
a controller that does not answer (refused connection, timeout) raises `ApiError` with
`status` None, naming the URL. The client is synchronous (httpx) and safe to share between
threads.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx
from pydantic import TypeAdapter, ValidationError

from supergw_proto import certfiles
from supergw_proto.api import (
    HOSTS_PAGE_MAX,
    BucketView,
    ClientView,
    EventView,
    GatewayRef,
    GatewayView,
    Health,
    HistoryView,
    HostPage,
    HostQuery,
    HostView,
    RebalanceView,
    ReplicaHealth,
    StatusView,
    WeightBody,
)
from supergw_proto.reports import ORDERS_GENERATION_HEADER, AgentOrders, GatewayReport, Heartbeat

API_PREFIX = "/api/v1"
DEFAULT_TIMEOUT_S = 10.0

T = TypeVar("T")

_STATUS = TypeAdapter(StatusView)
_GATEWAY = TypeAdapter(GatewayView)
_GATEWAYS = TypeAdapter(list[GatewayView])
_BUCKET = TypeAdapter(BucketView)
_BUCKETS = TypeAdapter(list[BucketView])
_HOST_PAGE = TypeAdapter(HostPage)
_CLIENTS = TypeAdapter(list[ClientView])
_EVENTS = TypeAdapter(list[EventView])
_HISTORY = TypeAdapter(HistoryView)
_REBALANCE = TypeAdapter(RebalanceView)


class ApiError(Exception):
    """A call the controller refused (`status` is the HTTP status, `detail` its message) or
    that got no answer at all (`status` None, `detail` what went wrong)."""

    def __init__(self, method: str, url: str, status: int | None, detail: str) -> None:
        self.method, self.url, self.status, self.detail = method, url, status, detail
        said = f"HTTP {status}: {detail}" if status is not None else f"no answer: {detail}"
        super().__init__(f"{method} {url}: {said}")

    @property
    def answered(self) -> bool:
        """Whether the controller answered (an HTTP error), rather than not at all."""
        return self.status is not None


def read_token(path: Path) -> str:
    """The token in a token file (`.run/config/api-token`), surrounding whitespace removed."""
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the API token: {exc.strerror or exc}") from None
    if not token:
        raise ValueError(f"{path}: the API token file is empty")
    return token


def _detail(resp: httpx.Response) -> str:
    """The API's message: `detail` of its JSON error body, else the start of the body."""
    try:
        body = resp.json()
    except (ValueError, UnicodeDecodeError):
        return resp.text[:300] or resp.reason_phrase
    if isinstance(body, dict) and "detail" in body:
        detail = body["detail"]
        return detail if isinstance(detail, str) else json.dumps(detail)
    return resp.text[:300]


def trust(ca_file: Path) -> ssl.SSLContext:
    """A TLS context that trusts only the CA in `ca_file` (PEM), for `verify`."""
    if not ca_file.exists():
        raise ValueError(certfiles.missing(ca_file, "ca"))
    try:
        return ssl.create_default_context(cafile=str(ca_file))
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"{ca_file}: cannot load the CA certificate: {exc}") from None


class ControllerClient:
    """One controller's REST API. `token` is the bearer token (or a path to a token file);
    operator calls need an operator token, `report`/`heartbeat` the gateway's agent token.
    `verify`: an `ssl.SSLContext` trusting the controllers' CA for https (`trust(ca_file)`),
    True for the system's store. `timeout`: seconds for each call, or an `httpx.Timeout`
    (a shorter connect timeout, so an unreachable controller is reported soon)."""

    def __init__(
        self,
        base_url: str,
        token: str | Path | None = None,
        *,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT_S,
        verify: bool | ssl.SSLContext = True,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        secret = read_token(token) if isinstance(token, Path) else token
        headers = {"Authorization": f"Bearer {secret}"} if secret else {}
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout, verify=verify,
                                  transport=transport)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def __repr__(self) -> str:
        return f"ControllerClient({self.base_url!r})"

    # -- the raw call ------------------------------------------------------------------

    def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
                json_body: Any = None, timeout: float | None = None) -> httpx.Response:
        """One HTTP call, answered or not: the response whatever its status (for callers that
        send what the typed methods cannot, such as malformed input). Raises `ApiError` only
        when nothing answered."""
        kwargs: dict[str, Any] = {"params": params, "json": json_body}
        if timeout is not None:
            kwargs["timeout"] = timeout
        try:
            return self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiError(method, self.base_url + path, None, str(exc) or type(exc).__name__) from None

    def call(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
             json_body: Any = None, timeout: float | None = None) -> httpx.Response:
        """`request`, with any status >= 400 raised as `ApiError`."""
        resp = self.request(method, path, params=params, json_body=json_body, timeout=timeout)
        if resp.status_code >= 400:
            raise ApiError(method, self.base_url + path, resp.status_code, _detail(resp))
        return resp

    def _model(self, model: TypeAdapter[T], method: str, path: str, **kw: Any) -> T:
        resp = self.call(method, API_PREFIX + path, **kw)
        try:
            return model.validate_json(resp.content)
        except ValidationError as exc:
            raise ApiError(method, self.base_url + API_PREFIX + path, resp.status_code,
                           f"the answer does not match the API's schema: {exc}") from None

    # -- status, gateways --------------------------------------------------------------

    def status(self) -> StatusView:
        return self._model(_STATUS, "GET", "/status")

    def gateways(self) -> list[GatewayView]:
        return self._model(_GATEWAYS, "GET", "/gateways")

    def gateway(self, name: str) -> GatewayView:
        return self._model(_GATEWAY, "GET", f"/gateways/{name}")

    def drain(self, name: str) -> GatewayView:
        return self._model(_GATEWAY, "POST", f"/gateways/{name}/drain")

    def undrain(self, name: str) -> GatewayView:
        return self._model(_GATEWAY, "POST", f"/gateways/{name}/undrain")

    def set_weight(self, name: str, weight: float) -> GatewayView:
        body = WeightBody.model_construct(weight=weight).model_dump()  # the API judges the value
        return self._model(_GATEWAY, "PUT", f"/gateways/{name}/weight", json_body=body)

    # -- buckets -----------------------------------------------------------------------

    def buckets(self, gateway: str | None = None) -> list[BucketView]:
        """All K buckets, or only those `gateway` holds (filtered by the controller)."""
        return self._model(_BUCKETS, "GET", "/buckets", params=None if gateway is None else {"gateway": gateway})

    def bucket(self, bucket: int) -> BucketView:
        return self._model(_BUCKET, "GET", f"/buckets/{bucket}")

    def pin(self, bucket: int, gateway: str) -> BucketView:
        body = GatewayRef.model_construct(gateway=gateway).model_dump()
        return self._model(_BUCKET, "POST", f"/buckets/{bucket}/pin", json_body=body)

    def unpin(self, bucket: int) -> BucketView:
        return self._model(_BUCKET, "DELETE", f"/buckets/{bucket}/pin")

    def move(self, bucket: int, gateway: str) -> BucketView:
        body = GatewayRef.model_construct(gateway=gateway).model_dump()
        return self._model(_BUCKET, "POST", f"/buckets/{bucket}/move", json_body=body)

    def rebalance(self, dry_run: bool = False) -> RebalanceView:
        params = {"dry_run": "true" if dry_run else "false"}
        return self._model(_REBALANCE, "POST", "/rebalance", params=params)

    # -- hosts, events, history --------------------------------------------------------

    def hosts_page(self, query: HostQuery = HostQuery()) -> HostPage:
        """One page of hosts matching `query` (its `next_after` is the next page's `after`)."""
        return self._model(_HOST_PAGE, "GET", "/hosts", params=query.params())

    def hosts(self, query: HostQuery = HostQuery(limit=HOSTS_PAGE_MAX)) -> list[HostView]:
        """Every host matching `query`'s filters, page after page (for small sites and
        tests; a large site's operator wants `hosts_page`)."""
        out: list[HostView] = []
        while True:
            page = self.hosts_page(query)
            out.extend(page.hosts)
            if page.next_after is None:
                return out
            query = query.model_copy(update={"after": page.next_after})

    def clients(self) -> list[ClientView]:
        """Remote-access clients per gateway (empty without remote access)."""
        return self._model(_CLIENTS, "GET", "/clients")

    def events(self, limit: int = 100, since_id: int = 0) -> list[EventView]:
        """Newest first; `limit` 1..1000, only ids above `since_id`."""
        params = {"limit": limit, "since_id": since_id}
        return self._model(_EVENTS, "GET", "/events", params=params)

    def history(self, since: float | None = None, limit: int = 600) -> HistoryView:
        params: dict[str, Any] = {"limit": limit} | ({} if since is None else {"since": since})
        return self._model(_HISTORY, "GET", "/history", params=params)

    # -- the agents' routes (agent token) ----------------------------------------------

    def report(self, report: GatewayReport) -> None:
        self.call("POST", f"{API_PREFIX}/gateways/{report.gateway}/report",
                  json_body=report.model_dump(mode="json"))

    def heartbeat(self, heartbeat: Heartbeat, timeout: float | None = None) -> None:
        self.call("POST", f"{API_PREFIX}/gateways/{heartbeat.gateway}/heartbeat",
                  json_body=heartbeat.model_dump(mode="json"), timeout=timeout)

    def orders(self, gateway: str, after: int = 0, wait: float = 0.0) -> tuple[int, AgentOrders]:
        """The gateway's orders and the generation in force (`Supergw-Orders-Generation`):
        at once when that is above `after`, else when it changes, else after `wait` seconds."""
        resp = self.call("GET", f"{API_PREFIX}/gateways/{gateway}/orders", params={"after": after, "wait": wait},
                         timeout=max(DEFAULT_TIMEOUT_S, wait + 5.0))
        try:
            return int(resp.headers[ORDERS_GENERATION_HEADER]), AgentOrders.model_validate_json(resp.content)
        except (KeyError, ValueError) as exc:
            raise ApiError("GET", str(resp.url), resp.status_code,
                           f"the answer does not match the API's schema: {exc}") from None

    # -- outside /api/v1: health and metrics (no token needed) -------------------------

    def health(self, timeout: float | None = None) -> Health:
        """`/healthz`; a replica's answer is a `ReplicaHealth` (with `ha`). A controller that
        answers with an error status and a health body (a replica that is not ready) still
        returns that body."""
        resp = self.request("GET", "/healthz", timeout=timeout)
        try:
            data = resp.json()
        except (ValueError, UnicodeDecodeError):
            raise ApiError("GET", self.base_url + "/healthz", resp.status_code, _detail(resp)) from None
        if not isinstance(data, dict) or "status" not in data:
            raise ApiError("GET", self.base_url + "/healthz", resp.status_code, _detail(resp))
        try:
            return ReplicaHealth.model_validate(data) if data.get("ha") is not None else Health.model_validate(data)
        except ValidationError as exc:
            raise ApiError("GET", self.base_url + "/healthz", resp.status_code,
                           f"the answer does not match the API's schema: {exc}") from None

    def metrics(self) -> str:
        """`/metrics` in the Prometheus text format."""
        return self.call("GET", "/metrics").text

    def answers(self, timeout: float = 2.0) -> bool:
        """Whether the API answers at all (any HTTP status counts: it is serving)."""
        try:
            self.request("GET", "/healthz", timeout=timeout)
        except ApiError:
            return False
        return True
