"""The etcd side of leadership: one leader key under the store prefix, held by a lease.

`<prefix>/leader` holds `{"replica", "api"}` of the leader and is attached to its lease;
its create_revision is the leadership *term* (monotonic across leaders: etcd revisions
only grow). Key reads and transactions go through the store's typed `EtcdKV`; leases and
the watch through etcd's Lease and Watch services on a channel of our own (EtcdKV has
neither). Every call has a deadline of `timeout_s`, so a partitioned etcd shows up as
`EtcdUnavailable` quickly, never as a hang.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
from aetcd import rpc as _rpc

from supergw_controller.etcd_kv import Compare, Delete, EtcdError, EtcdKV, EtcdUnavailable, Get, Put
from supergw_controller.etcd_tls import EtcdTls

__all__ = ["Campaign", "EtcdError", "EtcdUnavailable", "LeaderInfo", "Leadership"]


@dataclass(frozen=True)
class LeaderInfo:
    replica: str
    api: str
    term: int  # the leader key's create_revision
    lease: int  # the lease the key is attached to

    @classmethod
    def parse(cls, value: bytes, create_revision: int, lease: int) -> LeaderInfo:
        try:
            data = json.loads(value.decode())
            replica, api = str(data["replica"]), str(data.get("api", ""))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            replica, api = "(unreadable leader key)", ""
        return cls(replica=replica, api=api, term=create_revision, lease=lease)


@dataclass(frozen=True)
class Campaign:
    """Outcome of one campaign: `won`, and the leader (us when won)."""

    won: bool
    leader: LeaderInfo


class Leadership:
    def __init__(
        self,
        endpoints: Sequence[str],
        prefix: str,
        replica: str,
        api: str,
        ttl_s: int,
        timeout_s: float,
        tls: EtcdTls | None = None,
    ) -> None:
        self.key = (prefix.rstrip("/") + "/leader").encode()
        self.replica = replica
        self.api = api
        self.ttl_s = ttl_s
        self.timeout_s = timeout_s
        self._where = ", ".join(endpoints)
        self._kv = EtcdKV(endpoints, timeout_s, tls)  # one channel for KV, leases and the watch
        self._lease = _rpc.LeaseStub(self._kv.channel)
        self._watch = _rpc.WatchStub(self._kv.channel)

    async def close(self) -> None:
        await self._kv.close()

    def _error(self, exc: grpc.aio.AioRpcError, what: str) -> EtcdError:
        return self._kv.error(exc, what, self.key)

    async def leader(self) -> LeaderInfo | None:
        kv = await self._kv.get(self.key)
        return None if kv is None else LeaderInfo.parse(kv.value, kv.create_revision, kv.lease)

    async def campaign(self) -> tuple[Campaign, float]:
        """Create the leader key with a fresh lease if nobody holds it.

        Returns the outcome and the monotonic time the lease was *requested* (the fence
        counts from it). A lost campaign revokes its unused lease."""
        sent = time.monotonic()
        try:
            granted = await self._lease.LeaseGrant(_rpc.LeaseGrantRequest(TTL=self.ttl_s), timeout=self.timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise self._error(exc, "a lease grant") from None
        lease = int(granted.ID)
        value = json.dumps({"replica": self.replica, "api": self.api}).encode()
        try:
            res = await self._kv.txn(
                [Compare(self.key, "create", 0)], [Put(self.key, value, lease), Get(self.key)], [Get(self.key)]
            )
        except EtcdError:
            await self._revoke_quietly(lease)
            raise
        if not res.succeeded:
            await self._revoke_quietly(lease)
        if not res.gets or not res.gets[-1]:
            raise EtcdUnavailable("campaign: the leader key vanished inside the transaction (expired meanwhile)")
        kv = res.gets[-1][0]
        return Campaign(res.succeeded, LeaderInfo.parse(kv.value, kv.create_revision, kv.lease)), sent

    async def keepalive(self, lease: int) -> bool:
        """One keep-alive; False when etcd no longer knows the lease (expired or revoked)."""
        call = self._lease.LeaseKeepAlive(iter([_rpc.LeaseKeepAliveRequest(ID=lease)]), timeout=self.timeout_s)
        try:
            async for reply in call:
                return int(reply.TTL) > 0
        except grpc.aio.AioRpcError as exc:
            raise self._error(exc, "a lease keep-alive") from None
        finally:
            call.cancel()
        raise EtcdUnavailable(f"etcd at {self._where} closed the keep-alive stream without an answer")

    async def resign(self, term: int, lease: int) -> None:
        """Delete the leader key if it is still ours (term), then revoke our lease."""
        await self._kv.txn([Compare(self.key, "create", term)], [Delete(self.key)])
        await self._revoke_quietly(lease)

    async def revoke(self, lease: int) -> None:
        """Revoke a (dead leader's) lease: etcd deletes its leader key at once."""
        try:
            await self._lease.LeaseRevoke(_rpc.LeaseRevokeRequest(ID=lease), timeout=self.timeout_s)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return  # already gone: what we wanted
            raise self._error(exc, "a lease revoke") from None

    async def _revoke_quietly(self, lease: int) -> None:
        try:
            await self.revoke(lease)
        except EtcdError:
            pass  # it expires by itself within its TTL

    async def changes(self) -> AsyncIterator[None]:
        """Yields whenever the leader key changes (created, deleted, replaced)."""
        stop = asyncio.Event()

        async def requests() -> AsyncIterator[Any]:
            yield _rpc.WatchRequest(create_request=_rpc.WatchCreateRequest(key=self.key))
            await stop.wait()

        call = self._watch.Watch(requests())
        try:
            async for resp in call:
                if resp.canceled:
                    raise EtcdError(f"etcd cancelled the leader watch: {resp.cancel_reason}")
                if resp.events:
                    yield None
        except grpc.aio.AioRpcError as exc:
            raise self._error(exc, "the leader watch") from None
        finally:
            stop.set()
            call.cancel()
