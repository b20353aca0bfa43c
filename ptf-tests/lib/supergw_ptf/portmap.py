"""The PTF port map (ptf-tests/ports.json), shared by run.sh and the tests."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from supergw_proto.strict import StrictModel

DEFAULT_PORTS_FILE = Path(__file__).resolve().parents[2] / "ports.json"

RoleName = Literal["HOST", "GATEWAY", "UNKNOWN"]


class PortSpec(StrictModel):
    port: int = Field(ge=1, le=511)
    role: RoleName
    switch_iface: str = Field(min_length=1, max_length=15)
    ptf_iface: str = Field(min_length=1, max_length=15)


class PortMap(StrictModel):
    about: str = ""
    namespace: str = Field(min_length=1, max_length=32)
    cpu_port: int
    ports: tuple[PortSpec, ...]
    absent_port: int = Field(description="a port number no interface is attached to")

    @model_validator(mode="after")
    def _check(self) -> PortMap:
        numbers = [p.port for p in self.ports]
        if len(set(numbers)) != len(numbers):
            raise ValueError("duplicate port numbers in port map")
        ifaces = [p.switch_iface for p in self.ports] + [p.ptf_iface for p in self.ports]
        if len(set(ifaces)) != len(ifaces):
            raise ValueError("duplicate interface names in port map")
        if self.absent_port in numbers or self.absent_port == self.cpu_port:
            raise ValueError("absent_port must not be an attached port or the CPU port")
        minimums: tuple[tuple[RoleName, int], ...] = (("HOST", 3), ("GATEWAY", 2), ("UNKNOWN", 1))
        for role, minimum in minimums:
            if len(self.with_role(role)) < minimum:
                raise ValueError(f"the suite needs at least {minimum} {role} ports")
        return self

    def with_role(self, role: RoleName) -> list[int]:
        return [p.port for p in self.ports if p.role == role]

    @property
    def hosts(self) -> list[int]:
        return self.with_role("HOST")

    @property
    def gateways(self) -> list[int]:
        return self.with_role("GATEWAY")

    @property
    def unknown(self) -> list[int]:
        return self.with_role("UNKNOWN")


def load(path: Path = DEFAULT_PORTS_FILE) -> PortMap:
    return PortMap.model_validate_json(path.read_text(encoding="utf-8"))


def main(argv: list[str] | None = None) -> int:
    """Print the port map for run.sh: `namespace NAME`, `cpu_port N`, then `port N SW PTF`."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("file", type=Path, nargs="?", default=DEFAULT_PORTS_FILE)
    args = parser.parse_args(argv)
    try:
        pm = load(args.file)
    except (OSError, ValueError) as exc:
        print(f"bad port map {args.file}: {exc}", file=sys.stderr)
        return 2
    print(f"namespace {pm.namespace}")
    print(f"cpu_port {pm.cpu_port}")
    for p in pm.ports:
        print(f"port {p.port} {p.switch_iface} {p.ptf_iface}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
