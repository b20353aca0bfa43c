"""Running the build's commands: progress on stderr, a failure says which command and why."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


class BuildError(Exception):
    """A build step failed; the message says what to do next."""


@dataclass(frozen=True)
class Progress:
    """Progress lines on stderr under one prefix (`make package`'s, `make deploy-test`'s)."""

    prefix: str

    def say(self, msg: str) -> None:
        print(f"{self.prefix}: {msg}", file=sys.stderr, flush=True)

    @contextmanager
    def step(self, what: str) -> Iterator[None]:
        """Announce a long step and say how long it took."""
        self.say(f"{what} ...")
        t0 = time.monotonic()
        yield
        self.say(f"{what}: done in {time.monotonic() - t0:.1f} s")


say = Progress("package").say
step = Progress("package").step


def run(argv: Sequence[str | Path], *, cwd: Path | None = None, env: Mapping[str, str] | None = None,
        hint: str = "", capture: bool = False) -> str:
    """Run argv; on failure raise BuildError with the command, its status, its output's tail and `hint`."""
    args = [str(a) for a in argv]
    full_env = {**os.environ, **(env or {})}
    try:
        p = subprocess.run(args, cwd=cwd, env=full_env, text=True, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except FileNotFoundError:
        raise BuildError(f"{args[0]}: command not found. {hint or 'Run .ci/install-deps (make deps).'}") from None
    if p.returncode != 0:
        tail = "\n".join(p.stdout.strip().splitlines()[-25:])
        raise BuildError(f"`{' '.join(args)}` exited {p.returncode}:\n{tail}" + (f"\n{hint}" if hint else ""))
    return p.stdout if capture else ""
