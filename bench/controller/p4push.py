"""Times writing the whole bucket table (K entries) in one P4Runtime WriteRequest.

A minimal synchronous P4Runtime client (finsy's generated protos over grpc): arbitration,
pipeline, batched writes. Objects are looked up by name in the P4Info, names come from
the generated constants.
"""

from __future__ import annotations

import queue
import statistics
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
from finsy.proto import p4i, p4r, p4r_grpc
from google.protobuf import text_format

from supergw_controller import p4constants as pc
from supergw_controller.bucket import mac_to_int


class P4PushError(RuntimeError):
    pass


def canonical(value: int) -> bytes:
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def load_p4info(path: Path) -> p4i.P4Info:
    info = p4i.P4Info()
    text_format.Parse(path.read_text(), info)
    return info


class PrimaryClient:
    def __init__(self, addr: str, device_id: int, election_low: int, timeout: float = 10.0) -> None:
        self.device_id = device_id
        self.election = p4r.Uint128(high=0, low=election_low)
        self._channel = grpc.insecure_channel(addr)
        self._stub = p4r_grpc.P4RuntimeStub(self._channel)
        self._out: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
        self._arb: queue.Queue[p4r.StreamMessageResponse] = queue.Queue()
        self._stream = self._stub.StreamChannel(self._requests())
        threading.Thread(target=self._read, name="p4push-stream", daemon=True).start()
        self._out.put(p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(device_id=device_id, election_id=self.election)))
        try:
            msg = self._arb.get(timeout=timeout)
        except queue.Empty:
            raise P4PushError(f"no arbitration reply from {addr}") from None
        if msg.arbitration.status.code != 0:
            raise P4PushError(f"not primary at {addr}: {msg.arbitration.status.message}")

    def _requests(self) -> Iterator[p4r.StreamMessageRequest]:
        while (m := self._out.get()) is not None:
            yield m

    def _read(self) -> None:
        try:
            for msg in self._stream:
                if msg.HasField("arbitration"):
                    self._arb.put(msg)
        except grpc.RpcError:
            pass

    def close(self) -> None:
        self._out.put(None)
        self._channel.close()

    def set_pipeline(self, info: p4i.P4Info) -> None:
        self._stub.SetForwardingPipelineConfig(
            p4r.SetForwardingPipelineConfigRequest(
                device_id=self.device_id,
                election_id=self.election,
                action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
                config=p4r.ForwardingPipelineConfig(p4info=info),
            )
        )

    def write(self, kind: int, entries: Sequence[p4r.TableEntry]) -> float:
        req = p4r.WriteRequest(device_id=self.device_id, election_id=self.election, atomicity=p4r.WriteRequest.CONTINUE_ON_ERROR)
        for e in entries:
            req.updates.add(type=kind, entity=p4r.Entity(table_entry=e))
        start = time.perf_counter()
        try:
            self._stub.Write(req, timeout=60)
        except grpc.RpcError as exc:
            raise P4PushError(f"Write of {len(entries)} updates failed: {exc.code().name}: {exc.details()}") from None
        return time.perf_counter() - start

    def count_entries(self, table_id: int) -> int:
        req = p4r.ReadRequest(device_id=self.device_id, entities=[p4r.Entity(table_entry=p4r.TableEntry(table_id=table_id))])
        return sum(len(resp.entities) for resp in self._stub.Read(req, timeout=60))


def bucket_entries(info: p4i.P4Info, k: int, gateways: Sequence[tuple[int, str]]) -> tuple[int, list[p4r.TableEntry]]:
    table = next((t for t in info.tables if t.preamble.name == pc.TABLE_BUCKETS), None)
    action = next((a for a in info.actions if a.preamble.name == pc.ACTION_SET_GATEWAY), None)
    if table is None or action is None:
        raise P4PushError(f"P4Info lacks {pc.TABLE_BUCKETS} or {pc.ACTION_SET_GATEWAY}")
    field_id = next(f.id for f in table.match_fields if f.name == pc.MATCH_BUCKETS_BUCKET)
    params = {p.name: p.id for p in action.params}
    entries = []
    for b in range(k):
        port, mac = gateways[b % len(gateways)]
        e = p4r.TableEntry(table_id=table.preamble.id)
        e.match.add(field_id=field_id, exact=p4r.FieldMatch.Exact(value=canonical(b)))
        e.action.action.action_id = action.preamble.id
        e.action.action.params.add(param_id=params[pc.PARAM_SET_GATEWAY_PORT], value=canonical(port))
        e.action.action.params.add(param_id=params[pc.PARAM_SET_GATEWAY_GATEWAY_MAC], value=canonical(mac_to_int(mac)))
        entries.append(e)
    return table.preamble.id, entries


@dataclass(frozen=True)
class PushResult:
    insert_s: list[float]
    modify_s: list[float]
    delete_s: list[float]
    entries_read_back: int

    @property
    def insert_median(self) -> float:
        return statistics.median(self.insert_s)

    @property
    def modify_median(self) -> float:
        return statistics.median(self.modify_s)


def measure_full_table_push(
    addr: str, device_id: int, p4info: Path, k: int, gateways: Sequence[tuple[int, str]], reps: int = 3
) -> PushResult:
    """INSERT all K entries in one batch, read them back, MODIFY all, DELETE all; `reps` times."""
    info = load_p4info(p4info)
    client = PrimaryClient(addr, device_id, election_low=1)
    try:
        client.set_pipeline(info)
        table_id, entries = bucket_entries(info, k, gateways)
        _, moved = bucket_entries(info, k, list(gateways[1:]) + list(gateways[:1]))
        ins, mod, dele = [], [], []
        read_back = 0
        for _ in range(reps):
            ins.append(client.write(p4r.Update.INSERT, entries))
            read_back = client.count_entries(table_id)
            if read_back != k:
                raise P4PushError(f"wrote {k} bucket entries but read back {read_back}")
            mod.append(client.write(p4r.Update.MODIFY, moved))
            dele.append(client.write(p4r.Update.DELETE, entries))
        return PushResult(ins, mod, dele, read_back)
    finally:
        client.close()
