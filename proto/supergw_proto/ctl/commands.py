"""Each `supergwctl` command: the one API call it makes and what it shows.

A command returns `Shown`: the API's JSON (`--json` prints it as the API sent it, through
the API's models) and the human text. Commands that change something say what changed."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from supergw_proto.api import GatewayView, HostQuery
from supergw_proto.ctl import render
from supergw_proto.rest import ControllerClient


@dataclass(frozen=True)
class Shown:
    data: Any  # JSON-ready: the API's answer
    text: str


Command = Callable[[ControllerClient, argparse.Namespace], Shown]


def as_json(answer: BaseModel | list[Any]) -> Any:
    if isinstance(answer, list):
        return [as_json(a) for a in answer]
    return answer.model_dump(mode="json")


def status(api: ControllerClient, args: argparse.Namespace) -> Shown:
    s = api.status()
    return Shown(as_json(s), render.status(s))


def gateways(api: ControllerClient, args: argparse.Namespace) -> Shown:
    if args.name is not None:
        g = api.gateway(args.name)
        return Shown(as_json(g), render.gateway(g))
    gws = api.gateways()
    return Shown(as_json(gws), render.gateways(gws))


def buckets(api: ControllerClient, args: argparse.Namespace) -> Shown:
    if args.bucket is not None:
        b = api.bucket(args.bucket)
        return Shown(as_json(b), render.buckets([b]))
    bs = api.buckets(args.gateway)
    return Shown(as_json(bs), render.buckets(bs))


def hosts(api: ControllerClient, args: argparse.Namespace) -> Shown:
    """One page of hosts (or, with --all, every page), and where the next page starts."""
    query = HostQuery(limit=args.limit, after=args.after, gateway=args.gateway, bucket=args.bucket, port=args.port,
                      ip=args.ip, mac=args.mac, learned=False if args.waiting else None)
    page = api.hosts_page(query)
    if args.all:
        found = list(page.hosts)
        while page.next_after is not None:
            page = api.hosts_page(query.model_copy(update={"after": page.next_after}))
            found.extend(page.hosts)
        page = page.model_copy(update={"hosts": found})
    return Shown(as_json(page), render.host_page(page, next_command(args, page.next_after)))


def next_command(args: argparse.Namespace, after: str | None) -> str | None:
    """The command line of the next page (the same filters, `--after` the last MAC shown)."""
    if after is None:
        return None
    words = ["supergwctl", "hosts"]
    for flag, value in (("--gateway", args.gateway), ("--bucket", args.bucket), ("--port", args.port),
                        ("--ip", args.ip), ("--mac", args.mac)):
        if value is not None:
            words += [flag, str(value)]
    if args.waiting:
        words.append("--waiting")
    if args.limit != 100:
        words += ["--limit", str(args.limit)]
    return " ".join(words + ["--after", after])


def clients(api: ControllerClient, args: argparse.Namespace) -> Shown:
    cs = api.clients()
    return Shown(as_json(cs), render.clients(cs))


def events(api: ControllerClient, args: argparse.Namespace) -> Shown:
    es = api.events(limit=args.limit, since_id=args.since_id)
    return Shown(as_json(es), render.events(es))


def _gateway_changed(g: GatewayView, said: str) -> Shown:
    return Shown(as_json(g), f"{said}\n\n{render.gateways([g])}")


def drain(api: ControllerClient, args: argparse.Namespace) -> Shown:
    g = api.drain(args.name)
    said = f"{g.name} drained: it gets no new buckets"
    if g.buckets:
        said += (f"\nwarning: {g.name} still carries {g.buckets} buckets: pinned buckets stay where they are "
                 f"(`supergwctl buckets` shows them; unpin or move them before taking {g.name} down)")
    else:
        said += " and carries none now"
    return _gateway_changed(g, said)


def undrain(api: ControllerClient, args: argparse.Namespace) -> Shown:
    g = api.undrain(args.name)
    return _gateway_changed(g, f"{g.name} undrained: the rebalance rounds refill it gradually")


def weight(api: ControllerClient, args: argparse.Namespace) -> Shown:
    g = api.set_weight(args.name, args.weight)
    return _gateway_changed(g, f"{g.name} weight {g.weight:g}: the next rebalance rounds follow it")


def pin(api: ControllerClient, args: argparse.Namespace) -> Shown:
    b = api.pin(args.bucket, args.gateway)
    return Shown(as_json(b), f"bucket {b.bucket} pinned to {b.pinned}\n\n{render.buckets([b])}")


def unpin(api: ControllerClient, args: argparse.Namespace) -> Shown:
    b = api.unpin(args.bucket)
    return Shown(as_json(b), f"bucket {b.bucket} unpinned (stays on {render.cell(b.gateway)} until moved)\n\n"
                             f"{render.buckets([b])}")


def move(api: ControllerClient, args: argparse.Namespace) -> Shown:
    b = api.move(args.bucket, args.gateway)
    return Shown(as_json(b), f"bucket {b.bucket} moved to {b.gateway}\n\n{render.buckets([b])}")


def rebalance(api: ControllerClient, args: argparse.Namespace) -> Shown:
    r = api.rebalance(dry_run=args.dry_run)
    return Shown(as_json(r), render.rebalance(r))
