"""Config loading: the example is valid and every kind of bad config is rejected clearly."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from supergw_controller.config import Config, ConfigError, load_config, parse_config
from supergw_proto.p4constants import CPU_PORT, MAX_BUCKETS, BucketHash

EXAMPLE = Path(__file__).resolve().parents[1] / "example-config.yaml"


def base() -> dict[str, Any]:
    return {
        "switch": {"address": "127.0.0.1:50700", "device_id": 700, "election_id": {"high": 0, "low": 5}},
        "pipeline": {"p4info": "p4info.txtpb"},
        "gateway_ip": "10.0.0.1",
        "buckets": 64,
        "vmac_base": "02:5e:00:00:00:00",
        "ports": {1: "host", 2: "host", 11: "gateway", 12: {"role": "gateway", "interface": "sgw-g2"}},
        "gateways": [
            {"name": "gw1", "port": 11, "mac": "52:54:00:00:01:01", "agent_token": "agent-gw1-secret-0001"},
            {"name": "gw2", "port": 12, "mac": "52-54-00-00-01-02", "weight": 2, "agent_token": "agent-gw2-secret-0002"},
        ],
        "api": {"listen": "127.0.0.1:18700", "token": "secret-token"},
    }


@pytest.fixture
def cfgdir(tmp_path: Path) -> Path:
    (tmp_path / "p4info.txtpb").write_text("# p4info\n")
    return tmp_path


def load(cfgdir: Path, data: Any) -> Config:
    path = cfgdir / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_config(path)


def bad(cfgdir: Path, data: Any) -> str:
    with pytest.raises(ConfigError) as ei:
        load(cfgdir, data)
    return str(ei.value)


def test_valid_config_resolves_paths_and_defaults(cfgdir: Path) -> None:
    cfg = load(cfgdir, base())
    assert cfg.pipeline.p4info == cfgdir / "p4info.txtpb"
    assert cfg.state_db == cfgdir / "supergw-state.sqlite3"
    assert cfg.gateways[1].mac == "52:54:00:00:01:02"
    assert cfg.ports[12].interface == "sgw-g2"
    assert cfg.bucket_mask == 63
    assert cfg.timing.dead_after_s == pytest.approx(0.3)
    assert cfg.rebalancer.threshold == pytest.approx(1.10)
    assert cfg.switch.election_id.value == 5
    assert cfg.api.read_token() == "secret-token"
    assert cfg.dispatch.hash is BucketHash.CRC32
    assert cfg.dispatch.partition_period is None


def test_dispatch_section(cfgdir: Path) -> None:
    cfg = load(cfgdir, mutate("dispatch", {"hash": "identity", "partition_period": 16}))
    assert cfg.dispatch.hash is BucketHash.IDENTITY
    assert cfg.dispatch.partition_period == 16
    assert cfg.model_dump(mode="json")["dispatch"] == {"hash": "identity", "partition_period": 16}


def test_example_config_is_valid(tmp_path: Path) -> None:
    # The example points at the committed P4Info; validate it with that path swapped out.
    data = yaml.safe_load(EXAMPLE.read_text())
    (tmp_path / "p4info.txtpb").write_text("")
    data["pipeline"]["p4info"] = str(tmp_path / "p4info.txtpb")
    cfg = parse_config(data, EXAMPLE.parent, str(EXAMPLE))
    assert len(cfg.gateways) == 2


def mutate(path: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(base())
    node: Any = data
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    last = keys[-1]
    if value is _DELETE:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[int(last) if last.isdigit() else last] = value
    return data


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("gateways.1.port", 2, "gateways[1].port: must be a port listed in ports with role 'gateway'"),
        ("gateways.1.port", 99, "gateways[1].port: must be a port listed in ports with role 'gateway'"),
        ("gateways.1.name", "gw1", "gateways[1].name: duplicate name 'gw1'"),
        ("gateways.1.mac", "52:54:00:00:01:01", "gateways[1].mac: duplicate MAC"),
        ("gateways.1.mac", "01:00:5e:00:00:01", "gateways[1].mac: 01:00:5e:00:00:01 is a multicast MAC"),
        ("gateways.1.mac", "not-a-mac", "gateways[1].mac: 'not-a-mac' is not a MAC address"),
        ("gateways.1.mac", "02:5e:00:00:00:05", "gateways[1].mac: 02:5e:00:00:00:05 lies inside the vmac block"),
        ("gateways.0.weight", 0, "gateways[0].weight: Input should be greater than 0"),
        ("gateways.0.weight", -1.5, "gateways[0].weight: Input should be greater than 0"),
        ("gateways.0.weight", float("inf"), "gateways[0].weight: Input should be a finite number"),
        ("gateways.0.name", "", "gateways[0].name:"),
        ("gateways.0.colour", "red", "gateways[0].colour: unknown key"),
        ("gateways", [], "gateways: List should have at least 1 item"),
        ("buckets", 100, "buckets: 100 is not a power of two"),
        ("buckets", 0, "buckets: 0 is not a power of two"),
        ("buckets", MAX_BUCKETS * 2, f"exceeds MAX_BUCKETS = {MAX_BUCKETS}"),
        ("vmac_base", "00:5e:00:00:00:00", "vmac_base: 00:5e:00:00:00:00 is not locally administered"),
        ("vmac_base", "03:5e:00:00:00:00", "vmac_base: 03:5e:00:00:00:00 is multicast"),
        ("vmac_base", "02:5e:00:00:00:01", "vmac_base: 02:5e:00:00:00:01 must have its low 16 bits zero"),
        ("gateway_ip", "10.0.0.300", "gateway_ip:"),
        ("gateway_ip", "0.0.0.0", "gateway_ip: 0.0.0.0 cannot be a gateway address"),
        ("gateway_ip", "224.0.0.1", "gateway_ip: 224.0.0.1 cannot be a gateway address"),
        ("gateway_ip6", {"link_local": "2001:db8::1"}, "gateway_ip6.link_local: 2001:db8::1 is not a link-local unicast address"),
        ("gateway_ip6", {"link_local": "fe80::1", "global": "fe80::2"}, "gateway_ip6.global: fe80::2 is not a global"),
        ("gateway_ip6", {"link_local": "fe80::1", "global": "ff02::1"}, "gateway_ip6.global: ff02::1 is not a global"),
        ("gateway_ip6", {"link_local": "fe80::1", "global": "::"}, "gateway_ip6.global: :: is not a global"),
        ("gateway_ip6", {"link_local": "fe80::1", "global": "10.0.0.1"}, "gateway_ip6.global:"),
        ("gateway_ip6", {"global": "2001:db8::1"}, "gateway_ip6.link_local: required key is missing"),
        ("gateway_ip6", {"link_local": "fe80::1", "site": "x"}, "gateway_ip6.site: unknown key"),
        ("ports.1", "router", "ports.1.role: Input should be 'host' or 'gateway'"),
        ("ports.70000", "host", "ports: port 70000 is outside 0..65535"),
        ("ports.12", {"role": "gateway", "interface": "x" * 16}, "ports.12.interface:"),
        ("switch.address", "localhost", "switch.address: 'localhost' must be 'host:port'"),
        ("switch.address", "h:99999", "switch.address: 'h:99999' must be 'host:port'"),
        ("switch.device_id", -1, "switch.device_id: Input should be greater than or equal to 0"),
        ("switch.election_id", {"high": 0, "low": 0}, "switch.election_id: election_id must be greater than 0"),
        ("switch", _DELETE, "switch: required key is missing"),
        ("pipeline", _DELETE, "pipeline: required key is missing"),
        ("pipeline.p4info", "missing.txtpb", "pipeline.p4info: file not found"),
        ("pipeline.device_config", "missing.json", "pipeline.device_config: file not found"),
        ("api.token", "short", "api.token: must be at least 8 characters long"),
        ("api.token", _DELETE, "api: no operator token: give 'tokens'"),
        ("api.token_file", "tok.txt", "api: give at most one of 'token' or 'token_file'"),
        ("gateways.0.agent_token", _DELETE, "gateways[0].agent_token_file: required while heartbeat is on"),
        ("gateways.0.agent_token", "short", "gateways[0].agent_token: must be at least 16 characters long"),
        ("gateways.0.agent_token_file", "gw1.token", "gateway 'gw1': give at most one of 'agent_token' or 'agent_token_file'"),
        ("gateways.1.agent_token", "agent-gw1-secret-0001", "gateways[1] (gw2) agent token: the same secret as gateways[0] (gw1)"),
        ("api.token", "agent-gw1-secret-0001", "the same secret as api.token"),
        ("api.tokens", [{"name": "ro", "role": "reader", "token": "r" * 16}], "api.tokens[0].role: Input should be 'read-only' or 'admin'"),
        ("api.tokens", [{"name": "ro", "role": "read-only"}], "api.tokens[0]: token 'ro': give exactly one of 'token' or 'token_file'"),
        ("api.tokens", [{"name": "ro", "role": "read-only", "token": "short"}], "api.tokens[0].token: must be at least 16 characters long"),
        ("api.tokens", [{"name": "admin", "role": "read-only", "token": "r" * 16}], "api: duplicate token names ['admin']"),
        ("api.tokens", [{"name": "ro", "role": "read-only", "token_file": "missing.token"}], "api.tokens[0].token_file: cannot read"),
        ("api.tls", {"cert": "missing.pem", "key": "missing.key"}, "api.tls.cert: file not found"),
        ("api.tls", {"cert": "rest.crt", "key": "rest.key"}, "rest.key: make it with `supergw-gateway pki --out DIR --server rest=ADDRESS"),
        ("switch.tls", {"cert": "p4rt.crt", "key": "p4rt.key"}, "switch.tls.cert: file not found: "),
        ("switch.tls", {"cert": "p4rt.crt", "key": "p4rt.key"}, "p4rt.crt: make it with `supergw-gateway pki --out DIR --client p4rt`"),
        ("api.tls", {"cert": "x.pem"}, "api.tls.key: required key is missing"),
        ("switch.tls", {"cert": "c.pem"}, "switch.tls: give both 'cert' and 'key'"),
        ("switch.tls", {"cacert": "missing.pem"}, "switch.tls.cacert: file not found"),
        ("switch.tls", {"cacert": "ca.crt"}, "ca.crt: copy there the ca.crt of the site's CA (`supergw-gateway pki --out DIR"),
        ("switch.tls", {"server_name": ""}, "switch.tls.server_name: String should have at least 1 character"),
        ("switch.tls", {"ssl": True}, "switch.tls.ssl: unknown key"),
        ("api.listen", "127.0.0.1", "api.listen: '127.0.0.1' must be 'address:port'"),
        ("timing", {"missed_heartbeats": 0}, "timing.missed_heartbeats: Input should be greater than or equal to 1"),
        ("timing", {"heartbeat_interval_ms": -5}, "timing.heartbeat_interval_ms: Input should be greater than 0"),
        ("timing", {"ageing": 3}, "timing.ageing: unknown key"),
        ("dispatch", {"hash": "crc16"}, "dispatch.hash: unknown bucket hash 'crc16': use one of crc32, identity"),
        ("dispatch", {"hash": "IDENTITY"}, "dispatch.hash: unknown bucket hash 'IDENTITY'"),
        ("dispatch", {"hash": 1}, "dispatch.hash: unknown bucket hash 1"),
        ("dispatch", {"partition_period": 100}, "dispatch.partition_period: 100 is not a power of two"),
        ("dispatch", {"partition_period": 0}, "dispatch.partition_period: Input should be greater than or equal to 1"),
        ("dispatch", {"partition_period": 128}, "dispatch.partition_period: 128 exceeds buckets (64)"),
        ("dispatch", {"salt": 1}, "dispatch.salt: unknown key"),
        ("rebalancer", {"threshold": 0.9}, "rebalancer.threshold: Input should be greater than 1"),
        ("rebalancer", {"move_budget": 0}, "rebalancer.move_budget: Input should be greater than or equal to 1"),
        ("rebalancer", {"hysteresis": 1.5}, "rebalancer.hysteresis: Input should be less than 1"),
        ("port_monitor", {"enabled": True, "colour": 1}, "port_monitor.colour: unknown key"),
        ("gatewyas", [], "gatewyas: unknown key"),
        ("gateways.0.heartbeat_from", ["gw1.example"], "gateways[0].heartbeat_from: 'gw1.example' is not an IP address or network"),
        ("gateways.0.heartbeat_from", ["192.0.2.11/24"], "'192.0.2.11/24' is not an IP address or network (e.g. 192.0.2.11 or 192.0.2.0/28): 192.0.2.11/24 has host bits set"),
        ("heartbeats", {"key_overlap_s": -1}, "heartbeats.key_overlap_s: Input should be greater than or equal to 0"),
        ("heartbeats", {"untrusted_rate_per_s": 0}, "heartbeats.untrusted_rate_per_s: Input should be greater than 0"),
        ("heartbeats", {"receive_buffer_bytes": 1024}, "heartbeats.receive_buffer_bytes: Input should be greater than or equal to 65536"),
        ("heartbeats", {"flood": True}, "heartbeats.flood: unknown key"),
        ("api.ops_token_required", "sometimes", "api.ops_token_required: Input should be a valid boolean"),
    ],
)
def test_bad_config_names_the_key(cfgdir: Path, path: str, value: Any, expected: str) -> None:
    assert expected in bad(cfgdir, mutate(path, value))


def test_cpu_port_cannot_have_a_role(cfgdir: Path) -> None:
    assert f"ports: port {CPU_PORT} is the CPU port" in bad(cfgdir, mutate(f"ports.{CPU_PORT}", "host"))


def test_port_monitor_needs_an_interface(cfgdir: Path) -> None:
    data = mutate("port_monitor", {"enabled": True})
    data["ports"][12] = "gateway"
    assert "port_monitor.enabled: no port names an 'interface'" in bad(cfgdir, data)


def test_duplicate_interface(cfgdir: Path) -> None:
    data = mutate("ports.11", {"role": "gateway", "interface": "sgw-g2"})
    assert "interface: 'sgw-g2' is also used by port" in bad(cfgdir, data)


def test_several_errors_are_all_reported(cfgdir: Path) -> None:
    data = mutate("buckets", 3)
    data["gateways"][0]["weight"] = 0
    msg = bad(cfgdir, data)
    assert "buckets: 3 is not a power of two" in msg
    assert "gateways[0].weight" in msg


def test_two_gateways_on_one_port(cfgdir: Path) -> None:
    assert "gateways[1].port: port 11 is already used by gateways[0]" in bad(cfgdir, mutate("gateways.1.port", 11))


def test_token_file(cfgdir: Path) -> None:
    (cfgdir / "tok.txt").write_text("file-token-123\n")
    data = mutate("api", {"listen": "127.0.0.1:18701", "token_file": "tok.txt"})
    assert load(cfgdir, data).api.read_token() == "file-token-123"
    (cfgdir / "tok.txt").write_text("x\n")
    assert "api.token_file: token in" in bad(cfgdir, data)
    data = mutate("api", {"listen": "127.0.0.1:18701", "token_file": "nope.txt"})
    assert "api.token_file: file not found" in bad(cfgdir, data)
    # A token file that disappears after validation fails with a clear error, not a traceback.
    (cfgdir / "tok.txt").write_text("file-token-123\n")
    cfg = load(cfgdir, mutate("api", {"listen": "127.0.0.1:18701", "token_file": "tok.txt"}))
    (cfgdir / "tok.txt").unlink()
    with pytest.raises(ConfigError, match="api.token_file: cannot read"):
        cfg.api.read_token()


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "nope.yaml")


def test_not_yaml(tmp_path: Path) -> None:
    p = tmp_path / "c.yaml"
    p.write_text("switch: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(p)


@pytest.mark.parametrize("doc", ["", "- a\n- b\n", "just a string\n"])
def test_top_level_must_be_mapping(tmp_path: Path, doc: str) -> None:
    p = tmp_path / "c.yaml"
    p.write_text(doc)
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(p)


def test_agent_token_file_is_read_once_and_checked(cfgdir: Path) -> None:
    (cfgdir / "gw1.token").write_text("gw1-agent-secret-from-file\n")
    data = mutate("gateways.0", {"name": "gw1", "port": 11, "mac": "52:54:00:00:01:01", "agent_token_file": "gw1.token"})
    cfg = load(cfgdir, data)
    assert cfg.agent_secret("gw1") == "gw1-agent-secret-from-file"
    assert cfg.agent_secret("gw2") == "agent-gw2-secret-0002"
    (cfgdir / "gw1.token").unlink()  # read at load: a later change of the file cannot break a running controller
    assert cfg.agent_secret("gw1") == "gw1-agent-secret-from-file"
    # The secret never shows in the config's repr (logs, tracebacks).
    assert "gw1-agent-secret-from-file" not in repr(cfg) and "agent-gw2-secret-0002" not in repr(cfg)
    assert "agent_token_file: cannot read" in bad(cfgdir, data)
    (cfgdir / "gw1.token").write_text("short\n")
    assert "gateways[0].agent_token_file: the secret in" in bad(cfgdir, data)
    (cfgdir / "gw1.token").write_text("")
    assert "shorter than 16 characters" in bad(cfgdir, data)


def test_unreadable_agent_token_file(cfgdir: Path) -> None:
    import os

    if os.geteuid() == 0:
        pytest.skip("root reads any file: a mode-000 file is readable here")
    (cfgdir / "gw1.token").write_text("gw1-agent-secret-from-file\n")
    (cfgdir / "gw1.token").chmod(0)
    data = mutate("gateways.0", {"name": "gw1", "port": 11, "mac": "52:54:00:00:01:01", "agent_token_file": "gw1.token"})
    assert "gateways[0].agent_token_file: cannot read" in bad(cfgdir, data)


def test_agent_secret_of_gateway_without_agent(cfgdir: Path) -> None:
    data = mutate("gateways.1", {"name": "gw2", "port": 12, "mac": "52:54:00:00:01:02", "heartbeat": False})
    cfg = load(cfgdir, data)
    with pytest.raises(ConfigError, match="gateway 'gw2' has no agent_token"):
        cfg.agent_secret("gw2")
    with pytest.raises(KeyError):
        cfg.agent_secret("gw9")


def test_operator_tokens_with_roles(cfgdir: Path) -> None:
    from supergw_controller.config import Role

    (cfgdir / "viewer.token").write_text("viewer-secret-0123456789\n")
    data = mutate(
        "api.tokens",
        [
            {"name": "alice", "role": "admin", "token": "alice-secret-0123456789"},
            {"name": "viewer", "role": "read-only", "token_file": "viewer.token"},
        ],
    )
    cfg = load(cfgdir, data)
    assert cfg.api.operator_tokens() == [
        ("alice", Role.ADMIN, "alice-secret-0123456789"),
        ("viewer", Role.READ_ONLY, "viewer-secret-0123456789"),
        ("admin", Role.ADMIN, "secret-token"),  # the legacy api.token: an admin named "admin"
    ]
    del data["api"]["token"]
    assert load(cfgdir, data).api.read_token() == "alice-secret-0123456789"
    data["api"]["tokens"] = data["api"]["tokens"][1:]
    with pytest.raises(ConfigError, match="api: no admin token configured"):
        load(cfgdir, data).api.read_token()


def test_tls_paths_resolve(cfgdir: Path) -> None:
    (cfgdir / "c.pem").write_text("x")
    (cfgdir / "k.pem").write_text("x")
    cfg = load(cfgdir, mutate("api.tls", {"cert": "c.pem", "key": "k.pem"}))
    assert cfg.api.tls is not None and cfg.api.tls.cert == cfgdir / "c.pem" and cfg.api.scheme == "https"
