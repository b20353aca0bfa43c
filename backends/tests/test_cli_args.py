"""Command-line arguments that are wrong fail as usage errors, not tracebacks."""

import argparse

import pytest

from supergw_gateway.cli import listen_address


@pytest.mark.parametrize("text", ["127.0.0.1:8080", "0.0.0.0:0", "[::1]:9000", ":7000"])
def test_listen_address_accepts(text: str) -> None:
    assert listen_address(text) == text


@pytest.mark.parametrize(
    ("text", "why"),
    [("foo", "not ADDRESS:PORT"), ("1.2.3.4:http", "not ADDRESS:PORT"), ("1.2.3.4:70000", "not ADDRESS:PORT"),
     ("gw1:80", "not an IP address")],
)
def test_listen_address_rejects(text: str, why: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=why):
        listen_address(text)
