"""The heartbeat key follows the agent's token file on both sides, without a restart: the
controller re-reads it (and accepts the previous key for `heartbeats.key_overlap_s`), the
agent re-reads its own copy (and keys each beat with both secrets for its overlap), so no
beat is lost whichever side is rotated first."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from supergw_controller import heartbeat_keys
from supergw_controller.heartbeat import HeartbeatReceiver
from supergw_controller.liveness import heartbeat_receiver
from supergw_gateway import agent_secret
from supergw_gateway.agent_secret import RotatingSecret
from supergw_gateway.beacon import HeartbeatSender
from supergw_gateway.config import read_secret
from supergw_proto.beats import encode

from corekit import Clock, make_config

OLD, NEW = "g1-secret-before-rotation", "g1-secret-after-rotation!"


def _config(tmp_path: Path, clock: Callable[[], float] | None = None) -> tuple[Path, HeartbeatReceiver, Clock]:
    token = tmp_path / "agent-g1.token"
    token.write_text(OLD + "\n")
    gateways = [
        {"name": "g1", "port": 11, "mac": "52:54:00:00:01:01", "agent_token_file": str(token)},
        {"name": "g2", "port": 12, "mac": "52:54:00:00:01:02", "agent_token": "unit-agent-g2-token"},
        {"name": "g3", "port": 13, "mac": "52:54:00:00:01:03", "heartbeat": False},
    ]
    fake = Clock()
    cfg = make_config(tmp_path, gateways=gateways, heartbeats={"key_overlap_s": 120.0})
    return token, heartbeat_receiver(cfg, fake if clock is None else clock), fake


def _beat(secret: str, seq: int) -> bytes:
    return encode("g1", secret.encode(), 1, seq, time.time_ns())


def _rotate(path: Path, secret: str) -> None:
    tmp = path.with_suffix(".new")
    tmp.write_text(secret + "\n")
    tmp.replace(path)  # as config management does: a new inode


def test_controller_accepts_the_new_key_and_the_old_one_for_the_overlap_only(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    token, rx, clock = _config(tmp_path)
    assert rx.accept(_beat(OLD, 1), "192.0.2.10:5000") is not None
    assert rx.accept(_beat(NEW, 2), "192.0.2.10:5000") is None  # not rotated yet
    _rotate(token, NEW)
    clock.t += heartbeat_keys.CHECK_EVERY_S
    with caplog.at_level(logging.WARNING):
        rx.keys.refresh()
    assert "gateway g1: heartbeat key rotated; the previous key is accepted for 120s more" in caplog.text
    assert rx.accept(_beat(NEW, 3), "192.0.2.10:5000") is not None
    assert rx.accept(_beat(OLD, 4), "192.0.2.10:5000") is not None  # an agent not rotated yet
    assert rx.keys.previous_key_beats == 1 and rx.keys.rotations == 1
    clock.t += 120.0
    assert rx.accept(_beat(OLD, 5), "192.0.2.10:5000") is None  # the overlap is over
    assert rx.accept(_beat(NEW, 6), "192.0.2.10:5000") is not None
    assert rx.rejected == {"bad_mac": 2}


def test_controller_keeps_the_last_good_key_when_the_file_is_broken(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    token, rx, clock = _config(tmp_path)
    token.write_text("short\n")  # below the 16 characters a secret needs
    clock.t += heartbeat_keys.CHECK_EVERY_S
    with caplog.at_level(logging.ERROR):
        rx.keys.refresh()
    assert "heartbeat keys NOT reloaded, the keys read before stay in force" in caplog.text
    assert rx.accept(_beat(OLD, 1), "192.0.2.10:5000") is not None


def test_agent_follows_its_token_file_and_sends_both_keys_during_its_overlap(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "gw1.token"
    path.write_text(OLD + "\n")
    clock = Clock()
    secret = RotatingSecret(lambda: read_secret(path, "token_file"), "controller http://c", overlap_s=60, clock=clock)
    assert secret.keys() == [OLD.encode()]
    _rotate(path, NEW)
    assert secret.current() == OLD  # checked at most every CHECK_EVERY_S
    clock.t += agent_secret.CHECK_EVERY_S
    assert secret.current() == NEW and secret.keys() == [NEW.encode(), OLD.encode()]
    clock.t += 60
    assert secret.keys() == [NEW.encode()]
    path.write_text("")  # broken: the last good secret stays, and the log says so once
    clock.t += agent_secret.CHECK_EVERY_S
    with caplog.at_level(logging.ERROR):
        assert secret.current() == NEW
        clock.t += agent_secret.CHECK_EVERY_S
        assert secret.current() == NEW
    assert caplog.text.count("agent token NOT reloaded") == 1


@pytest.mark.parametrize("agent_first", [True, False])
def test_no_beat_is_lost_whichever_side_is_rotated_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, agent_first: bool) -> None:
    """Real sockets, the agent's real sender thread and the controller's real receiver."""
    monkeypatch.setattr(agent_secret, "CHECK_EVERY_S", 0.0)
    monkeypatch.setattr(heartbeat_keys, "CHECK_EVERY_S", 0.0)
    ctl_token, rx, _ = _config(tmp_path, time.monotonic)  # real time: the sender thread's
    agent_token = tmp_path / "agent-side.token"
    agent_token.write_text(OLD + "\n")
    port = rx.open("127.0.0.1", 0).getsockname()[1]
    secret = RotatingSecret(lambda: read_secret(agent_token, "token_file"), "controller", overlap_s=120)
    sender = HeartbeatSender("g1", [(f"http://127.0.0.1:{port}", secret)], 0.02, lambda: True)
    seqs: list[int] = []

    def collect(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            seqs.extend(b.seq for b in rx.drain())
            time.sleep(0.005)

    sender.start()
    try:
        collect(0.2)
        first, second = (agent_token, ctl_token) if agent_first else (ctl_token, agent_token)
        _rotate(first, NEW)
        collect(0.3)  # one side rotated, the other not yet: beats must still be accepted
        _rotate(second, NEW)
        collect(0.3)
    finally:
        sender.stop()
        rx.close()
    assert len(seqs) >= 30
    assert seqs == list(range(seqs[0], seqs[-1] + 1)), f"beats lost during the rotation: {seqs}"
    assert secret.rotations == 1 and rx.keys.rotations == 1
