"""`supergwctl` without a controller: where it finds the URL, token and CA, how it refuses
bad command lines (exit 2, nothing sent), an unreachable controller (exit 3 at once), and
the tables. End to end against the real REST app: controller/tests/test_supergwctl.py."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from supergw_proto.api import ClientView, EventView, MoveView, RebalanceView
from supergw_proto.ctl import render
from supergw_proto.ctl.cli import EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE, main, parser
from supergw_proto.ctl.target import DEFAULT_URL, UsageError, api_token, controller_url, resolve, tls_trust


def invoke(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, env=env, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    f = tmp_path / "operator.token"
    f.write_text("  secret-from-file-0123456789\n")
    return f


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when returned: nothing listens there


# -- target ----------------------------------------------------------------------------


def test_url_option_then_env_then_default() -> None:
    assert controller_url(None, {}) == DEFAULT_URL
    assert controller_url(None, {"SUPERGW_URL": "https://ctl.example:8443/"}) == "https://ctl.example:8443"
    assert controller_url("http://10.0.0.3:8080", {"SUPERGW_URL": "https://ctl.example:8443"}) == "http://10.0.0.3:8080"


@pytest.mark.parametrize(("url", "says"), [
    ("10.0.0.3:8080", "is not a controller URL"),
    ("ftp://10.0.0.3", "is not a controller URL"),
    ("http://", "is not a controller URL"),
    ("http://10.0.0.3:8080/api/v1", "without a path"),
])
def test_bad_url_is_a_usage_error(url: str, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        controller_url(url, {})


def test_token_file_option_then_env(token_file: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.token"
    other.write_text("secret-other\n")
    assert api_token(token_file, {"SUPERGW_TOKEN_FILE": str(other)}) == "secret-from-file-0123456789"
    assert api_token(None, {"SUPERGW_TOKEN_FILE": str(other)}) == "secret-other"
    assert api_token(None, {"SUPERGW_TOKEN": " secret-env \n"}) == "secret-env"
    assert api_token(token_file, {"SUPERGW_TOKEN": "secret-env"}) == "secret-from-file-0123456789"


def test_token_problems_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no API token: pass --token-file FILE or set SUPERGW_TOKEN_FILE"):
        api_token(None, {})
    with pytest.raises(UsageError, match="both SUPERGW_TOKEN_FILE and SUPERGW_TOKEN are set"):
        api_token(None, {"SUPERGW_TOKEN_FILE": "/x", "SUPERGW_TOKEN": "y"})
    with pytest.raises(UsageError, match="nope.token: cannot read the API token"):
        api_token(tmp_path / "nope.token", {})
    empty = tmp_path / "empty.token"
    empty.write_text("\n")
    with pytest.raises(UsageError, match="the API token file is empty"):
        api_token(empty, {})


def test_ca_file(tmp_path: Path) -> None:
    assert tls_trust("https://c:8443", None, {}) is True
    with pytest.raises(UsageError, match="is not https://"):
        tls_trust("http://c:8080", tmp_path / "ca.crt", {})
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(UsageError, match="junk.pem: cannot load the CA certificate"):
        tls_trust("https://c:8443", None, {"SUPERGW_CA_FILE": str(junk)})
    with pytest.raises(UsageError, match=r"file not found: .*/ca.crt: copy there the ca.crt .*supergw-gateway pki --out DIR"):
        tls_trust("https://c:8443", tmp_path / "ca.crt", {})


def test_target_never_shows_the_token(token_file: Path) -> None:
    t = resolve(None, token_file, None, {})
    assert "secret" not in repr(t) and t.url == DEFAULT_URL


# -- command line ----------------------------------------------------------------------


@pytest.mark.parametrize(("argv", "says"), [
    ([], "the following arguments are required: COMMAND"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["pin", "-1", "g1"], "'-1' is not a bucket index"),
    (["pin", "x", "g1"], "'x' is not a bucket index"),
    (["move", "3"], "the following arguments are required: GATEWAY"),
    (["weight", "g1", "nan"], "'nan' is not a finite number"),
    (["weight", "g1", "heavy"], "'heavy' is not a number"),
    (["drain"], "the following arguments are required: NAME"),
    (["status", "--timeout", "0"], "the timeout must be > 0 seconds"),
    (["events", "--limit", "many"], "invalid int value: 'many'"),
])
def test_bad_command_lines_exit_2(argv: list[str], says: str, token_file: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = invoke(argv, {"SUPERGW_TOKEN_FILE": str(token_file)})
    assert code == EXIT_USAGE and out == ""
    assert says in capsys.readouterr().err  # argparse writes to sys.stderr


def test_options_before_or_after_the_command(token_file: Path) -> None:
    p = parser()
    before = p.parse_args(["--json", "--url", "http://a:1", "--token-file", str(token_file), "gateways", "gw1"])
    after = p.parse_args(["gateways", "gw1", "--json", "--url", "http://a:1", "--token-file", str(token_file)])
    for args in (before, after):
        assert (args.json, args.url, args.token_file, args.name) == (True, "http://a:1", token_file, "gw1")
    assert not hasattr(p.parse_args(["status"]), "json")


def test_help_documents_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = invoke(["--help"], {})
    assert code == EXIT_OK
    text = capsys.readouterr().out
    assert "exit codes:\n  0  done\n  1  the controller refused" in text
    assert "  2  bad command line" in text and "  3  no answer from the controller" in text


def test_missing_token_is_exit_2_before_any_call() -> None:
    code, out, err = invoke(["status", "--url", f"http://127.0.0.1:{closed_port()}"], {})
    assert code == EXIT_USAGE and out == "" and "no API token" in err


def test_unreachable_controller_fails_at_once_naming_the_url(token_file: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    start = time.monotonic()
    code, out, err = invoke(["drain", "gw1", "--url", url, "--token-file", str(token_file)], {})
    assert time.monotonic() - start < 2.0
    assert code == EXIT_UNREACHABLE and out == ""
    assert f"cannot reach the controller at {url}: " in err and "Connection refused" in err
    assert "systemctl status supergw-controller" in err and "secret" not in err


def test_silent_controller_times_out_as_asked(token_file: Path) -> None:
    """A port that accepts the connection and never answers: exit 3 after --timeout."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        start = time.monotonic()
        code, out, err = invoke(["status", "--timeout", "0.5", "--url", url, "--token-file", str(token_file)], {})
        took = time.monotonic() - start
    assert 0.4 < took < 3.0, took
    assert code == EXIT_UNREACHABLE and out == "" and f"cannot reach the controller at {url}: " in err
    assert "timed out" in err


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_shell_code_without_a_token(shell: str) -> None:
    code, out, err = invoke(["completion", shell], {})
    assert code == EXIT_OK and err == "" and "supergwctl" in out and "_ARGCOMPLETE" in out


@pytest.mark.parametrize(("line", "want"), [
    ("supergwctl dr", {"drain"}),
    ("supergwctl un", {"undrain", "unpin"}),
    ("supergwctl rebalance --d", {"--dry-run"}),
    ("supergwctl status --to", {"--token-file"}),
])
def test_completion_answers_the_shell(line: str, want: set[str], tmp_path: Path) -> None:
    """The shell's side of argcomplete's protocol: COMP_LINE in, the candidates out."""
    answer = tmp_path / "completions"
    env = dict(os.environ, _ARGCOMPLETE="1", _ARGCOMPLETE_IFS="\n", COMP_LINE=line, COMP_POINT=str(len(line)),
               _ARGCOMPLETE_STDOUT_FILENAME=str(answer))
    done = subprocess.run([sys.executable, "-m", "supergw_proto.ctl"], env=env, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    assert {w.strip() for w in answer.read_text().split("\n")} == want


# -- tables ----------------------------------------------------------------------------


def test_table_aligns_and_marks_absent_values() -> None:
    text = render.table(("A", "LONG HEADER", "C"), [(1, None, True), ("wide value", 2.5, False)])
    assert text.splitlines() == [
        "A           LONG HEADER  C",
        "1           -            yes",
        "wide value  2.5          no",
    ]


def test_rates_and_ages() -> None:
    assert render.rate(0.0, "B/s") == "0B/s"
    assert render.rate(1500.0, "B/s") == "1.5kB/s"
    assert render.rate(2_340_000.0, "") == "2.34M"
    assert render.age(None) == "-" and render.age(0.04) == "0.0s"


def test_rebalance_shows_plan_loads_and_warnings() -> None:
    r = RebalanceView(dry_run=True, applied=False, moves=[MoveView(bucket=7, src="gw1", dst="gw2", reason="rebalance")],
                      load_before={"gw1": 3.0, "gw2": 1.0}, load_after={"gw1": 2.0, "gw2": 2.0},
                      ratio_before=1.5, ratio_after=1.0, warnings=["gw3 is dead"])
    text = render.rebalance(r)
    assert text.startswith("dry run: 1 moves planned, nothing written\nimbalance (max/mean): 1.50 -> 1.00")
    assert "gw1      3            2" in text and "7       gw1   gw2  rebalance" in text
    assert text.endswith("warning: gw3 is dead")
    applied = render.rebalance(r.model_copy(update={"dry_run": False, "applied": True}))
    assert applied.startswith("1 moves applied")


def test_events_in_utc() -> None:
    e = EventView(id=3, ts=0.0, kind="operator", bucket=None, src="gw1", dst=None, reason="drain", detail="ok", who="ops")
    assert render.events([e]).splitlines()[1].split() == ["3", "1970-01-01", "00:00:00", "operator", "drain", "-",
                                                          "gw1", "-", "ops", "ok"]


def test_clients_lists_each_client_and_counts_per_gateway() -> None:
    def c(gw: str, ident: str, pinned: bool) -> ClientView:
        return ClientView(gateway=gw, identity=ident, remote_host="198.51.100.1", remote_port=4500, vips=["10.90.0.2"],
                          established_at=0.0, present=True, bytes_in=10, bytes_out=20, pinned=pinned)

    out = render.clients([c("gw2", "b", False), c("gw1", "a", True), c("gw2", "c", True)])
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["GATEWAY", "IDENTITY", "ADDRESS"]
    assert [ln.split()[:2] for ln in lines[1:4]] == [["gw1", "a"], ["gw2", "b"], ["gw2", "c"]]
    assert lines[-1] == "clients per gateway: gw1: 1, gw2: 2"
    assert render.clients([]).splitlines()[-1] == "clients per gateway: no clients"
