"""The PTF test parameters run.sh passes (`--test-params`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from ptf import testutils
from pydantic import Field
from supergw_proto.strict import StrictModel

Target = Literal["ebpf", "bmv2"]


class TestParams(StrictModel):
    """What run.sh passes with --test-params."""

    grpcaddr: str = Field(min_length=3)
    p4info: Path
    device_id: int = Field(ge=0)
    cpu_port: int = Field(ge=0)
    target: Target
    device_config: Path | None = None
    ports_file: Path | None = None

    @classmethod
    def from_ptf(cls) -> TestParams:
        return cls.model_validate(testutils.test_params_get())
