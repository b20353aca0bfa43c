"""The UML guest's init script: what it mounts from the host, and what the host reads of it."""

import socket
import struct
from pathlib import Path

from supergw_gateway.uml import _mconsole_halt
from supergw_gateway.uml_init import boot_failure, host_paths_to_share


def test_checkout_under_tmp_is_shared_with_the_guest() -> None:
    # A CI clone in /tmp with its virtualenv inside: one mount of the clone covers both.
    clone = Path("/tmp/ci-clone")
    assert host_paths_to_share([clone / ".venv", clone]) == [clone]


def test_paths_outside_the_guest_tmpfs_need_no_mount() -> None:
    assert host_paths_to_share([Path("/work/main/.venv"), Path("/work/main"), Path("/usr")]) == []


def test_paths_under_two_tmpfs_dirs_are_each_shared() -> None:
    assert host_paths_to_share([Path("/run/a/venv"), Path("/tmp/b")]) == [Path("/tmp/b"), Path("/run/a/venv")]


def test_no_report_while_the_guest_is_still_booting(tmp_path: Path) -> None:
    assert boot_failure(tmp_path) is None
    (tmp_path / "guest-checked").write_text("ok\n")
    assert boot_failure(tmp_path) is None


def test_missing_modprobe_names_kmod_and_quotes_the_problems(tmp_path: Path) -> None:
    (tmp_path / "guest-problems").write_text(
        "missing command modprobe: install the Debian package kmod (.ci/install-deps installs it)\n")
    (tmp_path / "guest-checked").write_text("failed\n")
    msg = boot_failure(tmp_path)
    assert msg is not None
    assert "missing command modprobe: install the Debian package kmod" in msg
    assert "install kmod" in msg


def test_charon_exit_quotes_charon_log_and_names_kernel_ipsec(tmp_path: Path) -> None:
    (tmp_path / "guest-checked").write_text("ok\n")
    (tmp_path / "charon.log").write_text(
        "loading plugins\nfeature CUSTOM:libcharon in critical plugin 'charon-systemd' has unmet dependency:"
        " CUSTOM:kernel-ipsec\n")
    (tmp_path / "charon-exited").write_text("1\n")
    msg = boot_failure(tmp_path)
    assert msg is not None
    assert msg.startswith("charon exited during boot (status 1)")
    assert "unmet dependency: CUSTOM:kernel-ipsec" in msg and "esp4, xfrm_user" in msg


def test_mconsole_halt_speaks_the_uml_protocol(tmp_path: Path) -> None:
    sock_path = tmp_path / "mconsole"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as guest:
        guest.bind(str(sock_path))
        guest.settimeout(2)
        _mconsole_halt(sock_path)
        magic, version, length, data = struct.unpack("=III512s", guest.recv(1024))
    assert (magic, version, data[:length]) == (0xCAFEBABE, 2, b"halt")


def test_mconsole_halt_without_a_guest_is_quiet(tmp_path: Path) -> None:
    _mconsole_halt(tmp_path / "gone")
