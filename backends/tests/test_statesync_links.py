"""The backup link's lag bookkeeping: every acknowledged change that came from charon leaves
one lag sample (its arrival -> the ack), bounded; replayed messages leave none."""

from __future__ import annotations

import asyncio
import ssl
import struct
import time

import pytest

from supergw_gateway.statesync.links import LAG_SAMPLES, BackupLink, Kind, LinkStats, frame


def ack(seq: int) -> bytes:
    return frame(Kind.ACK, struct.pack("!Q", seq))


async def test_each_acknowledged_change_leaves_one_lag_sample_and_replays_none() -> None:
    stats = LinkStats()
    link = BackupLink("g0", ssl.create_default_context(), list, stats)
    now = time.monotonic()
    link._sync(b"replayed", None)  # seq 1: part of a full copy, no arrival from charon
    link._sync(b"change-a", now - 0.050)  # seq 2: arrived from charon 50 ms ago
    link._sync(b"change-b", now - 0.010)  # seq 3
    reader = asyncio.StreamReader()
    reader.feed_data(ack(1) + ack(2) + ack(3))
    reader.feed_eof()
    with pytest.raises(asyncio.IncompleteReadError):
        await link._read_acks(reader)
    assert len(stats.lags_ms) == 2
    assert stats.lags_ms[0] >= 50 and stats.lags_ms[1] >= 10
    assert stats.lag_ms_max == max(stats.lags_ms) and stats.lag_ms_last == stats.lags_ms[1]
    assert stats.acked_seq == 3 and link.outstanding == 0


def test_the_lag_samples_are_bounded_to_the_most_recent() -> None:
    stats = LinkStats()
    for i in range(LAG_SAMPLES + 10):
        stats.lags_ms.append(float(i))
    assert len(stats.lags_ms) == LAG_SAMPLES
    assert stats.lags_ms[0] == 10.0
