"""Operator writes against every controller replica at once: the load under which the HA
partition test and bench/ha check that no two leaders' switch writes overlap."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence


class MoveWriter:
    """Asks every replica (one thread each), every 20 ms, to move `bucket` back and forth
    between `gateways`, so every request a leader accepts is a switch write; records each
    answer as (replica, sent, answered, HTTP status or 0, body or error)."""

    def __init__(self, apis: Mapping[str, str], token: str, bucket: int, gateways: Sequence[str]) -> None:
        self.apis, self.token, self.bucket, self.gateways = dict(apis), token, bucket, list(gateways)
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
        url = f"{self.apis[name]}/api/v1/buckets/{self.bucket}/move"
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        i = 0
        while not self._stop.is_set():
            body = json.dumps({"gateway": self.gateways[i % len(self.gateways)]}).encode()
            i += 1
            t0 = time.time()
            req = urllib.request.Request(url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=3) as resp:
                    code, said = resp.status, resp.read(300).decode(errors="replace")
            except urllib.error.HTTPError as exc:
                code, said = exc.code, exc.read(300).decode(errors="replace")
            except (urllib.error.URLError, OSError) as exc:
                code, said = 0, str(exc)
            self.log.append((name, t0, time.time(), code, said))
            self._stop.wait(0.02)

    def accepted(self, name: str) -> list[tuple[float, float]]:
        """(sent, answered) of every request `name` accepted."""
        return [(s, a) for n, s, a, code, _ in self.log if n == name and code == 200]
