"""The etcd intent store against a real etcd: the SQLite store's contract, fencing, etcd away, config."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from etcd_server import EtcdServer
from supergw_controller.config import ConfigError, StoreBackend, load_config
from supergw_controller.etcd_kv import EtcdKV, Put
from supergw_controller.etcd_store import EtcdIntentStore
from supergw_controller.intent_store import (
    EventRecord,
    FencedError,
    Intent,
    IntentStore,
    IntentStoreApi,
    IntentStoreError,
    TakeoverRecord,
)
from supergw_controller.rebalancer import Move, MoveReason
from supergw_controller.stores import build_intent_store

from corekit import write_intent

PREFIX = "/supergw/test"
LEADER = "/supergw/test-election/leader"


def ev(i: int) -> EventRecord:
    return EventRecord(None, 100.0 + i, "operator", i, "gw1", "gw2", f"r{i}", f"d{i}", who="ops")


@pytest.fixture(params=["sqlite", "etcd"])
async def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[IntentStoreApi]:
    """Each store, so both are held to one contract."""
    if request.param == "sqlite":
        store: IntentStoreApi = IntentStore(tmp_path / "intent.sqlite3", max_events=5)
    else:
        etcd: EtcdServer = request.getfixturevalue("etcd_server")
        store = EtcdIntentStore([etcd.endpoint], PREFIX, max_events=5)
    await store.open()
    yield store
    await store.close()


@pytest.fixture
async def store(etcd_server: EtcdServer) -> AsyncIterator[EtcdIntentStore]:
    s = EtcdIntentStore([etcd_server.endpoint], PREFIX, timeout_s=1.0, max_events=5)
    await s.open()
    yield s
    await s.close()


@pytest.fixture
async def kv(etcd_server: EtcdServer) -> AsyncIterator[EtcdKV]:
    c = EtcdKV([etcd_server.endpoint], 1.0)
    yield c
    await c.close()


async def test_intent_round_trip(any_store: IntentStoreApi) -> None:
    s = any_store
    written = await write_intent(s)
    await s.set_weight("gw1", 3.0)
    assert await s.load() == Intent(weights={"gw1": 3.0}, drained=written.drained, pins=written.pins)
    with pytest.raises(ValueError, match="weight must be > 0"):
        await s.set_weight("gw1", 0)


async def test_takeover_records_round_trip(any_store: IntentStoreApi) -> None:
    """A taken-over gateway's record (remote access): stored, replaced as its fence is lifted,
    dropped at its release; beside the operator intent, not in its place."""
    s = any_store
    await s.set_drained("gw3", True)
    fenced = TakeoverRecord("gw1", "gw2", 1_700_000_000_123, '{"pool": "10.90.1.0/24"}', 1000.5)
    other = TakeoverRecord("gw4", "gw1", None, None, 2.0)
    await s.save_takeover(fenced)
    await s.save_takeover(other)
    assert (await s.load()) == Intent(drained={"gw3"}, takeovers={"gw1": fenced, "gw4": other})
    lifted = TakeoverRecord("gw1", "gw2", None, fenced.info, fenced.since)
    await s.save_takeover(lifted)
    await s.drop_takeover("gw4")
    await s.drop_takeover("gw9")  # none: a no-op
    assert (await s.load()).takeovers == {"gw1": lifted}


async def test_event_log_is_ordered_and_bounded(any_store: IntentStoreApi) -> None:
    s = any_store
    await s.record_moves([Move(3, None, "gw1", MoveReason.UNASSIGNED)], ts=99.0)
    await s.record_events([ev(i) for i in range(1, 4)])
    got = await s.events()
    assert [e.id for e in got] == [4, 3, 2, 1]
    assert got[-1] == EventRecord(1, 99.0, "move", 3, None, "gw1", "unassigned", "", None)
    assert got[0] == EventRecord(4, 103.0, "operator", 3, "gw1", "gw2", "r3", "d3", "ops")
    assert [e.id for e in await s.events(limit=2)] == [4, 3]
    assert [e.id for e in await s.events(since_id=2)] == [4, 3]
    for i in range(4, 11):  # one at a time and in a batch: the bound holds either way
        await s.record_event(ev(i))
    await s.record_events([ev(11), ev(12)])
    assert [e.id for e in await s.events(limit=100)] == [13, 12, 11, 10, 9]
    with pytest.raises(ValueError, match="limit"):
        await s.events(limit=0)


async def test_concurrent_appends_get_distinct_ids(any_store: IntentStoreApi) -> None:
    await asyncio.gather(*(any_store.record_event(ev(i)) for i in range(1, 5)), any_store.record_events([ev(5), ev(6)]))
    got = await any_store.events()
    assert [e.id for e in got] == [6, 5, 4, 3, 2]  # bound 5
    assert len({e.reason for e in got}) == 5


async def test_two_stores_on_one_prefix_append_without_losing_events(etcd_server: EtcdServer) -> None:
    a = EtcdIntentStore([etcd_server.endpoint], PREFIX)
    b = EtcdIntentStore([etcd_server.endpoint], PREFIX)
    await a.open()
    await b.open()
    await asyncio.gather(*(s.record_event(ev(i)) for i in range(1, 4) for s in (a, b)))
    assert [e.id for e in await a.events()] == [6, 5, 4, 3, 2, 1]  # compare-and-swap on event-seq
    await a.close()
    await b.close()


async def test_intent_and_events_survive_a_new_store_and_an_etcd_crash(
    store: EtcdIntentStore, etcd_server: EtcdServer
) -> None:
    await store.set_weight("gw1", 1.5)
    await store.pin(4, "gw2")
    await store.record_event(ev(1))
    await store.close()
    etcd_server.kill()
    etcd_server.start()
    again = EtcdIntentStore([etcd_server.endpoint], PREFIX)
    await again.open()
    assert await again.load() == Intent({"gw1": 1.5}, set(), {4: "gw2"})
    assert [e.id for e in await again.events()] == [1]
    other = EtcdIntentStore([etcd_server.endpoint], "/supergw/other-site")  # prefixes do not mix
    await other.open()
    assert await other.load() == Intent() and await other.events() == []
    await other.close()
    await again.close()


async def test_fence_lets_the_leader_write_and_refuses_everyone_else(store: EtcdIntentStore, kv: EtcdKV) -> None:
    won = await kv.txn([], [Put(LEADER.encode(), b"replica-a")])
    store.set_fence(LEADER, won.revision)
    await store.set_weight("gw1", 2.0)
    await store.record_event(ev(1))

    await kv.txn([], [Put(LEADER.encode(), b"replica-a")])  # a rewrite keeps the create revision
    await store.pin(1, "gw1")

    async def refused(write: Callable[[], Awaitable[Any]]) -> str:
        with pytest.raises(FencedError) as ei:
            await write()
        return str(ei.value)

    from supergw_controller.etcd_kv import Delete

    await kv.txn([], [Delete(LEADER.encode())])  # the lease expired
    msg = await refused(lambda: store.set_weight("gw1", 9.0))
    assert "no longer the leader" in msg and "no longer exists" in msg and LEADER in msg
    again = await kv.txn([], [Put(LEADER.encode(), b"replica-b")])  # another replica won
    msg = await refused(lambda: store.set_drained("gw1", True))
    assert f"created anew at revision {again.revision}" in msg
    await refused(lambda: store.pin(2, "gw2"))
    await refused(lambda: store.unpin(1))
    await refused(lambda: store.record_events([ev(2), ev(3)]))
    assert await store.load() == Intent({"gw1": 2.0}, set(), {1: "gw1"})  # nothing of the refused writes
    assert [e.id for e in await store.events()] == [1]

    store.set_fence(LEADER, again.revision)  # this replica leads again
    await store.record_event(ev(2))
    store.clear_fence()
    await store.unpin(1)
    assert (await store.load()).pins == {} and [e.id for e in await store.events()] == [2, 1]
    with pytest.raises(ValueError):
        store.set_fence(LEADER, 0)


async def test_etcd_down_is_a_clear_error_within_the_timeout(store: EtcdIntentStore, etcd_server: EtcdServer) -> None:
    etcd_server.kill()
    t0 = time.monotonic()
    with pytest.raises(IntentStoreError, match=f"etcd at {etcd_server.endpoint} did not answer.*check that etcd runs"):
        await store.set_weight("gw1", 2.0)
    with pytest.raises(IntentStoreError, match="did not answer"):
        await store.events()
    assert time.monotonic() - t0 < 5, "a dead etcd must fail the call at its deadline, not hang"
    etcd_server.start()  # the store uses the restarted member again without being reopened
    deadline = time.monotonic() + 10
    while True:
        try:
            await store.set_weight("gw1", 2.0)
            break
        except IntentStoreError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
    assert (await store.load()).weights == {"gw1": 2.0}


async def test_silent_etcd_fails_at_the_deadline(store: EtcdIntentStore, etcd_server: EtcdServer) -> None:
    etcd_server.pause()
    try:
        t0 = time.monotonic()
        with pytest.raises(IntentStoreError, match="within 1 s .*DEADLINE_EXCEEDED"):
            await store.record_event(ev(1))
        assert time.monotonic() - t0 < 5
    finally:
        etcd_server.resume()


async def test_open_without_etcd_says_where_it_looked(tmp_path: Path) -> None:
    from etcd_server import _free_port

    endpoint = f"127.0.0.1:{_free_port()}"  # nothing listens there
    store = EtcdIntentStore([endpoint], PREFIX, timeout_s=0.5)
    with pytest.raises(IntentStoreError, match=f"cannot open intent store etcd://{endpoint}.*did not answer"):
        await store.open()
    with pytest.raises(IntentStoreError, match="not open"):
        await store.load()


async def test_any_member_of_the_endpoint_list_serves(etcd_server: EtcdServer) -> None:
    from etcd_server import _free_port

    store = EtcdIntentStore([f"127.0.0.1:{_free_port()}", etcd_server.endpoint], PREFIX)
    await store.open()
    await store.set_weight("gw1", 1.25)
    assert (await store.load()).weights == {"gw1": 1.25}
    await store.close()


# ---- config ---------------------------------------------------------------------------------


def _config(tmp_path: Path, store: Any) -> Path:
    (tmp_path / "p4info.txtpb").write_text("# p4info\n")
    data = {
        "switch": {"address": "127.0.0.1:50700", "device_id": 700, "election_id": {"high": 0, "low": 5}},
        "pipeline": {"p4info": "p4info.txtpb"},
        "gateway_ip": "10.0.0.1",
        "buckets": 64,
        "vmac_base": "02:5e:00:00:00:00",
        "ports": {1: "host", 11: "gateway"},
        "gateways": [{"name": "gw1", "port": 11, "mac": "52:54:00:00:01:01", "agent_token": "agent-gw1-secret-0001"}],
        "api": {"listen": "127.0.0.1:18700", "token": "secret-token"},
    }
    if store is not None:
        data["store"] = store
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_config_default_is_sqlite_at_state_db(tmp_path: Path) -> None:
    cfg = load_config(_config(tmp_path, None))
    assert cfg.store.backend is StoreBackend.SQLITE
    built = build_intent_store(cfg)
    assert isinstance(built, IntentStore) and built.path == str(tmp_path / "supergw-state.sqlite3")


def test_config_etcd(tmp_path: Path) -> None:
    etcd = {"endpoints": ["10.0.0.1:2379", "http://10.0.0.2:2379"], "prefix": "/supergw/site-a", "timeout_s": 0.5}
    cfg = load_config(_config(tmp_path, {"backend": "etcd", "etcd": etcd}))
    built = build_intent_store(cfg)
    assert isinstance(built, EtcdIntentStore)
    assert built.prefix == "/supergw/site-a" and built.path.startswith("etcd://10.0.0.1:2379,")


@pytest.mark.parametrize(
    ("store", "says"),
    [
        ({"backend": "etcd"}, "store: backend is etcd but there is no store.etcd section: add store.etcd.endpoints"),
        ({"backend": "zookeeper"}, "store.backend: Input should be 'sqlite' or 'etcd'"),
        ({"backend": "etcd", "etcd": {"endpoints": []}}, "store.etcd.endpoints: List should have at least 1 item"),
        ({"backend": "etcd", "etcd": {"endpoints": ["localhost"]}}, "'localhost': expected host:port"),
        ({"backend": "etcd", "etcd": {"endpoints": ["h:99999"]}}, "'h:99999': expected host:port"),
        ({"backend": "etcd", "etcd": {"endpoints": ["https://h:2379"]}}, "is an https endpoint: add store.etcd.tls"),
        ({"backend": "etcd", "etcd": {"endpoints": ["http://h:2379"], "tls": {"cacert": "c.pem"}}}, "plain-text endpoint but store.etcd.tls is set"),
        ({"backend": "etcd", "etcd": {"endpoints": ["h:1"], "tls": {"cacert": "nope.pem"}}}, "store.etcd.tls.cacert: file not found"),
        ({"backend": "etcd", "etcd": {"endpoints": ["h:1"], "tls": {"cacert": "c.pem", "cert": "c.pem"}}}, "give both 'cert' and 'key'"),
        ({"backend": "etcd", "etcd": {"endpoints": ["h:1"], "tls": {}}}, "store.etcd.tls.cacert: required key is missing"),
        ({"backend": "etcd", "etcd": {"endpoints": ["10.0.0.1:1", "10.0.0.2:1"], "tls": {"cacert": "c.pem"}}}, "set tls.server_name"),
        ({"backend": "etcd", "etcd": {"endpoints": ["a:1", "b:2"]}}, "several etcd endpoints must be IP addresses"),
        ({"backend": "etcd", "etcd": {"endpoints": ["h:1"], "prefix": "supergw"}}, "store.etcd.prefix: 'supergw': must start with '/'"),
        ({"backend": "etcd", "etcd": {"endpoints": ["h:1"], "prefix": "/supergw/"}}, "no trailing or doubled '/'"),
        ({"backend": "etcd", "etcd": {"endpoints": ["h:1"], "prefix": "/a b"}}, "printable ASCII without spaces"),
        ({"backend": "etcd", "etcd": {"endpoints": ["h:1"], "timeout_s": 0}}, "store.etcd.timeout_s: Input should be greater than 0"),
        ({"backend": "etcd", "etcd": {"endpoints": ["h:1"], "typo": 1}}, "store.etcd.typo: unknown key"),
    ],
)
def test_config_bad_store_is_a_clear_error(tmp_path: Path, store: Any, says: str) -> None:
    (tmp_path / "c.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    with pytest.raises(ConfigError) as ei:
        load_config(_config(tmp_path, store))
    assert says in str(ei.value)
