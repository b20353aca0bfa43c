"""Commands on this machine (the one the test runs on), with failures that say what to do."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from sgwpkg.run import Progress


class DeployError(Exception):
    """A deploy-test step failed; the message names the step and the evidence."""


say = Progress("deploy-test").say
stage = Progress("deploy-test").step


def sh(argv: Sequence[str | Path], *, check: bool = True, timeout: float = 600, env: Mapping[str, str] | None = None,
       input_text: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    args = [str(a) for a in argv]
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd,
                           input=input_text, stdin=None if input_text is not None else subprocess.DEVNULL)
    except FileNotFoundError:
        raise DeployError(f"{args[0]}: command not found: run .ci/install-deps (make deps)") from None
    except subprocess.TimeoutExpired as exc:
        raise DeployError(f"`{' '.join(args)}` did not finish within {timeout:.0f} s") from exc
    if check and p.returncode != 0:
        out = (p.stdout + p.stderr).strip().splitlines()[-30:]
        raise DeployError(f"`{' '.join(args)}` exited {p.returncode}:\n  " + "\n  ".join(out))
    return p


def wait_for(what: str, probe: Callable[[], str | None], timeout: float, interval: float = 0.5) -> None:
    """Poll `probe` (returns None when satisfied, else why not) until it holds or time runs out."""
    deadline = time.monotonic() + timeout
    why = "not checked yet"
    while time.monotonic() < deadline:
        answer = probe()
        if answer is None:
            return
        why = answer
        time.sleep(interval)
    raise DeployError(f"{what}: not within {timeout:.0f} s; last: {why}")

