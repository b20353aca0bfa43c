"""The UML guest's init script: what it mounts from the host."""

from pathlib import Path

from supergw_gateway.uml import host_paths_to_share


def test_checkout_under_tmp_is_shared_with_the_guest() -> None:
    # A CI clone in /tmp with its virtualenv inside: one mount of the clone covers both.
    clone = Path("/tmp/ci-clone")
    assert host_paths_to_share([clone / ".venv", clone]) == [clone]


def test_paths_outside_the_guest_tmpfs_need_no_mount() -> None:
    assert host_paths_to_share([Path("/work/main/.venv"), Path("/work/main"), Path("/usr")]) == []


def test_paths_under_two_tmpfs_dirs_are_each_shared() -> None:
    assert host_paths_to_share([Path("/run/a/venv"), Path("/tmp/b")]) == [Path("/tmp/b"), Path("/run/a/venv")]
