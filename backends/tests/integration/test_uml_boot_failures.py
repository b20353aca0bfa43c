"""A UML guest that cannot come up says why at once, instead of timing out on VICI."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from supergw_gateway.config import Backend
from supergw_gateway.errors import GatewayError
from supergw_gateway.lab import Lab
from supergw_gateway.uml import UmlGuest
from supergw_gateway.uml_init import GUEST_COMMANDS, GUEST_MODULES, GuestPrereqs
from tests.integration.conftest import require_uml

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    require_uml()
    lab = Lab("uf", Backend.UML)
    lab.create()
    yield lab
    lab.destroy()


def boot_error(lab: Lab, prereqs: GuestPrereqs) -> tuple[str, float]:
    guest = UmlGuest(lab.config("a"), prereqs=prereqs)
    started = time.monotonic()
    try:
        with pytest.raises(GatewayError) as exc:
            guest.start()
        elapsed = time.monotonic() - started
    finally:
        guest.stop()
    assert guest.pid() is None  # the failed guest is not left running
    return str(exc.value), elapsed


def test_module_that_does_not_load_and_missing_command_are_named(lab: Lab) -> None:
    prereqs = GuestPrereqs(
        modules=(*GUEST_MODULES, "sgw_no_such_module"),
        commands={**GUEST_COMMANDS, "sgw-no-such-tool": "sgw-tools"},
    )
    msg, elapsed = boot_error(lab, prereqs)
    assert "kernel module sgw_no_such_module did not load" in msg
    assert "Module sgw_no_such_module not found" in msg  # modprobe's own words
    assert "missing command sgw-no-such-tool: install the Debian package sgw-tools" in msg
    assert "kernel module esp4" not in msg  # only what is actually wrong
    assert elapsed < lab.config("a").uml.boot_timeout_s / 2  # reported, not timed out


def test_charon_without_kernel_ipsec_is_detected_not_waited_for(lab: Lab) -> None:
    # Without xfrm_user charon's kernel-netlink plugin cannot load, so charon exits.
    prereqs = GuestPrereqs(modules=tuple(m for m in GUEST_MODULES if m != "xfrm_user"))
    msg, elapsed = boot_error(lab, prereqs)
    assert "charon exited during boot" in msg
    assert "kernel-ipsec" in msg  # quoted from charon.log
    assert "install" in msg and "kmod" in msg
    assert elapsed < lab.config("a").uml.boot_timeout_s / 2
