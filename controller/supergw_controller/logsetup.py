"""Structured, quiet logging: one `key=value` line per record on stderr."""

from __future__ import annotations

import logging
import sys
import time


class KeyValueFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        msg = record.getMessage().replace('"', "'")
        line = f'ts={ts} level={record.levelname.lower()} logger={record.name} msg="{msg}"'
        if record.exc_info:
            line += ' exc="' + self.formatException(record.exc_info).replace("\n", " | ").replace('"', "'") + '"'
        return line


class _ExpectedFinsyNoise(logging.Filter):
    """finsy warns about things that are normal here: no gNMI on the eBPF target, and the
    decreasing election id a promoted backup sees (p4lang/PI semantics)."""

    _NOISE = ("gNMI is not implemented", "election_id decreased")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING and any(n in record.getMessage() for n in self._NOISE):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


def setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KeyValueFormatter())
    handler.addFilter(_ExpectedFinsyNoise())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # finsy reports every channel event at INFO; keep it one level quieter than ours.
    logging.getLogger("finsy").setLevel(max(logging.WARNING, root.level))
    logging.getLogger("uvicorn.access").setLevel(max(logging.WARNING, root.level))
