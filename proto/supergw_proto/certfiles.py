"""What to tell an operator whose certificate file is missing: the `supergw-gateway pki`
command that makes it. One wording for every program that reads TLS files (the
controller's api.tls, switch.tls and store.etcd.tls, the agent's controller.ca_file,
supergwctl's --ca-file); the switch (Go) says the same in its own words.

`pki --out DIR` writes NAME.crt and NAME.key for each --server/--client NAME, and the CA
as ca.crt, so the missing file's name says which option makes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

GUIDE = 'docs/deploy-linux.md, "Certificates"'
Kind = Literal["ca", "server", "client"]


def how_to_make(path: Path, kind: Kind) -> str:
    """The pki command that makes `path` (a CA, or a server's or client's certificate or key)."""
    if kind == "ca":
        return (f"copy there the ca.crt of the site's CA (`supergw-gateway pki --out DIR ...` makes "
                f"DIR/ca.crt with the first certificate; {GUIDE})")
    name = path.stem
    option = f"--server {name}=ADDRESS[,NAME]" if kind == "server" else f"--client {name}"
    return (f"make it with `supergw-gateway pki --out DIR {option}` (on the box that keeps the CA) "
            f"and copy DIR/{name}.crt and DIR/{name}.key there, the key mode 0600 ({GUIDE})")


def missing(path: Path, kind: Kind) -> str:
    """`file not found: PATH: <how to make it>`."""
    return f"file not found: {path}: {how_to_make(path, kind)}"
