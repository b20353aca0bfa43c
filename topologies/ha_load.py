"""Operator writes against every controller replica at once: the load under which the HA
partition test and bench/ha check that no two leaders' switch writes overlap."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence

from supergw_proto.rest import ApiError, ControllerClient


class MoveWriter:
    """Asks every replica (one thread each), every 20 ms, to move `bucket` back and forth
    between `gateways`, so every request a leader accepts is a switch write; records each
    answer as (replica, sent, answered, HTTP status or 0 for no answer, body or error)."""

    def __init__(self, apis: Mapping[str, ControllerClient], bucket: int, gateways: Sequence[str]) -> None:
        self.apis, self.bucket, self.gateways = dict(apis), bucket, list(gateways)
        self.log: list[tuple[str, float, float, int, str]] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(n,), daemon=True) for n in self.apis]

    def __enter__(self) -> MoveWriter:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(10)

    def _run(self, name: str) -> None:
        api = self.apis[name]
        i = 0
        while not self._stop.is_set():
            gateway = self.gateways[i % len(self.gateways)]
            i += 1
            t0 = time.time()
            try:
                said = api.move(self.bucket, gateway).model_dump_json()[:300]
                code = 200
            except ApiError as exc:
                code, said = exc.status or 0, exc.detail[:300]
            self.log.append((name, t0, time.time(), code, said))
            self._stop.wait(0.02)

    def accepted(self, name: str) -> list[tuple[float, float]]:
        """(sent, answered) of every request `name` accepted."""
        return [(s, a) for n, s, a, code, _ in self.log if n == name and code == 200]
