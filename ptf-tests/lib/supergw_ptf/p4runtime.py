"""The PTF side of the P4Runtime client: the test parameters run.sh passes, and the
names of the shared client (`supergw_p4rt`) the tests import from here."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal

from ptf import testutils
from pydantic import BaseModel, ConfigDict, Field
from supergw_p4rt import (
    CounterValue,
    P4InfoIndex,
    P4RuntimeClient,
    P4RuntimeClientError,
    P4RuntimeWriteError,
    StreamKind,
    Value,
    code_name,
    decode,
    encode,
    entity,
    load_p4info,
)

LOG = logging.getLogger("supergw_ptf")

__all__ = [
    "LOG",
    "CounterValue",
    "P4InfoIndex",
    "P4RuntimeClient",
    "P4RuntimeClientError",
    "P4RuntimeWriteError",
    "StreamKind",
    "TestParams",
    "Value",
    "code_name",
    "decode",
    "encode",
    "entity",
    "load_p4info",
]


class TestParams(BaseModel):
    """What run.sh passes with --test-params."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    grpcaddr: str = Field(min_length=3)
    p4info: Path
    device_id: int = Field(ge=0)
    cpu_port: int = Field(ge=0)
    target: Literal["ebpf", "bmv2"]
    device_config: Path | None = None
    ports_file: Path | None = None

    @classmethod
    def from_ptf(cls) -> TestParams:
        return cls.model_validate(testutils.test_params_get())
