#!/usr/lib/supergw/gateway/bin/python
"""supergw-gateway-netns attach|detach NAME: the network namespace of supergw-gateway@NAME.

`supergw-gateway up` runs charon inside the named namespace of its config (`ip netns
exec`), and the agent unit joins /run/netns/sgw-gw-NAME. On a host whose NICs stay in the
host's own network stack (one gateway per box, the usual case) no such namespace exists:
`attach` then names the host's stack sgw-gw-NAME (`ip netns attach`, a name only: nothing
moves) and `detach` removes that name again. A namespace that already exists (several
gateways on one box, each with its NICs moved into its own namespace) is used as it is
and never removed. `attach` also checks what the packaged units rely on: the file's
gateway is NAME, its namespace is sgw-gw-NAME, its state_dir is /run/sgw-gw.

Installed by the supergw-gateway package as /usr/lib/supergw/gateway/libexec/supergw-gateway-netns;
the unit runs it with full privileges (ExecStartPre=+, ExecStopPost=+).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from supergw_gateway.config import GatewayConfig, load_config
from supergw_gateway.errors import GatewayError

CONFIG_DIR = Path("/etc/supergw/gateway")
STATE_DIR = Path("/run/sgw-gw")  # the config's default, and the unit's PIDFile=
NETNS_DIR = Path("/run/netns")


def namespace(name: str) -> str:
    return f"sgw-gw-{name}"


def marker(name: str) -> Path:
    """Present while `attach` named the host's stack for NAME (so `detach` may unname it)."""
    return STATE_DIR / f"{name}.host-netns"


def problems(cfg: GatewayConfig, name: str) -> list[str]:
    out = []
    if cfg.name != name:
        out.append(f"the file's gateway is {cfg.name!r}, the unit instance is {name!r}: "
                   f"name the file {cfg.name}.yaml or set `name: {name}`")
    if cfg.netns != namespace(name):
        out.append(f"namespace {cfg.netns!r}: the packaged units use {namespace(name)!r} "
                   "(leave `namespace:` out of the file)")
    if cfg.state_dir != STATE_DIR:
        out.append(f"state_dir {cfg.state_dir}: the packaged unit expects {STATE_DIR} (its PIDFile=); "
                   "leave `state_dir:` out of the file")
    return out


def attach(name: str) -> int:
    path = CONFIG_DIR / f"{name}.yaml"
    try:
        cfg = load_config(path)
    except GatewayError as exc:
        print(f"supergw-gateway@{name}: {exc}", file=sys.stderr)
        return 2
    bad = problems(cfg, name)
    if bad:
        print(f"supergw-gateway@{name}: {path}:\n  " + "\n  ".join(bad), file=sys.stderr)
        return 2
    ns = namespace(name)
    if (NETNS_DIR / ns).exists():
        if not marker(name).exists():
            print(f"supergw-gateway@{name}: using the existing network namespace {ns}")
        return 0
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    # Our own stack (this unit has no NetworkNamespace): naming PID 1's would need CAP_SYS_PTRACE.
    done = subprocess.run(["ip", "netns", "attach", ns, str(os.getpid())], capture_output=True, text=True)
    if done.returncode != 0:
        print(f"supergw-gateway@{name}: ip netns attach {ns} failed: {done.stderr.strip()}", file=sys.stderr)
        return 1
    marker(name).touch()
    print(f"supergw-gateway@{name}: the host's network stack is namespace {ns} (ip netns attach)")
    return 0


def detach(name: str) -> int:
    if marker(name).exists():
        subprocess.run(["ip", "netns", "delete", namespace(name)], check=False)
        marker(name).unlink()
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("attach", "detach"):
        print("usage: supergw-gateway-netns attach|detach NAME", file=sys.stderr)
        return 2
    return attach(argv[1]) if argv[0] == "attach" else detach(argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
