"""`supergwctl`: parse the command line, call the controller, print, exit with a code that
says what happened (EXIT_* below, also in `--help`)."""

from __future__ import annotations

import argparse
import ipaddress
import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

import argcomplete
import httpx
from argcomplete.shell_integration import shellcode

from supergw_proto.addresses import normalise_mac
from supergw_proto.api import HOSTS_PAGE_MAX
from supergw_proto.ctl import commands
from supergw_proto.ctl.target import DEFAULT_URL, ENV_CA_FILE, ENV_TOKEN, ENV_TOKEN_FILE, ENV_URL, Target, UsageError, resolve
from supergw_proto.rest import DEFAULT_TIMEOUT_S, ApiError, ControllerClient

PROG = "supergwctl"
EXIT_OK = 0
EXIT_API = 1  # the controller answered with an error (HTTP status >= 400, or an answer off the schema)
EXIT_USAGE = 2  # bad command line, token file or CA file: nothing was sent
EXIT_UNREACHABLE = 3  # no answer from the controller (refused, timed out, TLS failed)

CONNECT_TIMEOUT_S = 3.0  # a controller that does not even accept the connection is reported soon
SHELLS = ("bash", "zsh", "fish")  # supergwctl completion SHELL: argcomplete's shell code for it

EPILOG = f"""\
controller:  --url, else ${ENV_URL}, else {DEFAULT_URL}
token:       --token-file, else ${ENV_TOKEN_FILE}, else ${ENV_TOKEN}: one of the controller's
             api.tokens (read-only tokens run the read commands; changes need an admin token)
https:       --ca-file, else ${ENV_CA_FILE}: the CA that signed the controller's certificate
             (else the system's trust store)

exit codes:
  {EXIT_OK}  done
  {EXIT_API}  the controller refused (its HTTP status and message are printed)
  {EXIT_USAGE}  bad command line, token file or CA file (nothing was sent)
  {EXIT_UNREACHABLE}  no answer from the controller (not running, wrong URL, filtered, TLS refused, timed out)
"""


def bucket_index(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a bucket index (0..K-1)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a bucket index (0..K-1)")
    return value


def finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def mac_text(text: str) -> str:
    try:
        return normalise_mac(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def ip_text(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an IPv4 or IPv6 address") from None


def page_size(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= HOSTS_PAGE_MAX:
        raise argparse.ArgumentTypeError(f"{text!r}: a page holds 1..{HOSTS_PAGE_MAX} hosts")
    return value


def positive_seconds(text: str) -> float:
    value = finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the timeout must be > 0 seconds")
    return value


def connection_options() -> argparse.ArgumentParser:
    """The options every command takes, before or after its name (absent: SUPPRESS, so the
    subcommand's parser does not overwrite what the main parser read)."""
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("controller")
    g.add_argument("--url", default=argparse.SUPPRESS, help=f"controller base URL (${ENV_URL}; default {DEFAULT_URL})")
    g.add_argument("--token-file", type=Path, default=argparse.SUPPRESS, metavar="FILE",
                   help=f"file holding the operator token (${ENV_TOKEN_FILE}, or the token in ${ENV_TOKEN})")
    g.add_argument("--ca-file", "--cacert", dest="ca_file", type=Path, default=argparse.SUPPRESS, metavar="FILE",
                   help=f"PEM CA certificate that signed the controller's https certificate (${ENV_CA_FILE}; "
                        "--cacert as in curl and etcdctl)")
    g.add_argument("--timeout", type=positive_seconds, default=argparse.SUPPRESS, metavar="S",
                   help=f"seconds to wait for each answer (default {DEFAULT_TIMEOUT_S:g}; "
                        f"for the connection at most {CONNECT_TIMEOUT_S:g})")
    g.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                   help="print the API's JSON answer instead of a table")
    return p


def parser() -> argparse.ArgumentParser:
    common = connection_options()
    p = argparse.ArgumentParser(prog=PROG, description="Operate a supergw controller over its REST API.",
                                epilog=EPILOG, parents=[common], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, run: commands.Command, help: str) -> argparse.ArgumentParser:
        c = sub.add_parser(name, parents=[common], help=help, description=help)
        c.set_defaults(run=run)
        return c

    add("status", commands.status, "controller, switch and cluster summary (GET /status)")
    c = add("gateways", commands.gateways, "all gateways, or one in detail (GET /gateways[/NAME])")
    c.add_argument("name", nargs="?", metavar="NAME", help="one gateway")
    c = add("buckets", commands.buckets, "the bucket map, or one bucket (GET /buckets[/B])")
    c.add_argument("bucket", nargs="?", type=bucket_index, metavar="B", help="one bucket")
    c.add_argument("--gateway", metavar="NAME", help="only the buckets this gateway holds (GET /buckets?gateway=)")
    c = add("hosts", commands.hosts, "learned hosts with their bucket and gateway, one page by MAC, filtered "
                                     "(GET /hosts)")
    c.add_argument("--gateway", metavar="NAME", help="only hosts whose bucket this gateway holds")
    c.add_argument("--bucket", type=bucket_index, metavar="B", help="only hosts of bucket B")
    c.add_argument("--port", type=int, metavar="P", help="only hosts on switch port P")
    c.add_argument("--ip", type=ip_text, metavar="ADDR", help="the host with this IPv4 or IPv6 address")
    c.add_argument("--mac", type=mac_text, metavar="MAC", help="the host with this MAC")
    c.add_argument("--waiting", action="store_true", help="only hosts still waiting for an IPv4 source")
    c.add_argument("--limit", type=page_size, default=100, metavar="N",
                   help=f"hosts per page, 1..{HOSTS_PAGE_MAX} (default 100)")
    c.add_argument("--after", type=mac_text, metavar="MAC", help="the page after this MAC (the last line says which)")
    c.add_argument("--all", action="store_true", help="every matching host, page after page")
    add("clients", commands.clients, "remote-access clients per gateway, and whether each is pinned (GET /clients)")
    c = add("events", commands.events, "recent events, newest first (GET /events)")
    c.add_argument("--limit", type=int, default=100, metavar="N", help="at most N events, 1..1000 (default 100)")
    c.add_argument("--since-id", type=int, default=0, metavar="ID", help="only events with a larger id")
    c = add("drain", commands.drain, "move a gateway's unpinned buckets away now; it gets no new ones "
                                     "(POST /gateways/NAME/drain)")
    c.add_argument("name", metavar="NAME")
    c = add("undrain", commands.undrain, "make a drained gateway eligible again (POST /gateways/NAME/undrain)")
    c.add_argument("name", metavar="NAME")
    c = add("weight", commands.weight, "set a gateway's capacity weight, > 0 (PUT /gateways/NAME/weight)")
    c.add_argument("name", metavar="NAME")
    c.add_argument("weight", type=finite, metavar="WEIGHT")
    c = add("pin", commands.pin, "pin a bucket to a gateway, moving it there now (POST /buckets/B/pin)")
    c.add_argument("bucket", type=bucket_index, metavar="B")
    c.add_argument("gateway", metavar="GATEWAY")
    c = add("unpin", commands.unpin, "unpin a bucket (DELETE /buckets/B/pin)")
    c.add_argument("bucket", type=bucket_index, metavar="B")
    c = add("move", commands.move, "move a bucket to a gateway once (POST /buckets/B/move)")
    c.add_argument("bucket", type=bucket_index, metavar="B")
    c.add_argument("gateway", metavar="GATEWAY")
    c = add("rebalance", commands.rebalance, "run one rebalance round now (POST /rebalance)")
    c.add_argument("--dry-run", action="store_true", help="only show the moves it would make (?dry_run=true)")
    c = sub.add_parser("completion", help="print the shell code that completes supergwctl's commands and options",
                       description='bash: eval "$(supergwctl completion bash)" in ~/.bashrc, or save the output '
                                   "as /etc/bash_completion.d/supergwctl")
    c.add_argument("shell", choices=SHELLS)
    return p


def completion(shell: str) -> str:
    """The shell code that asks supergwctl itself for completions (argcomplete)."""
    return shellcode([PROG], shell=shell)


def advice(exc: ApiError, target: Target) -> str:
    """What to do next, for the failures an operator can fix."""
    if exc.status is None:
        hint = (f"is supergw-controller running there (systemctl status supergw-controller)? does --url / ${ENV_URL} "
                "name its api.listen address and scheme (http or https)? is the port filtered?")
        if "CERTIFICATE" in exc.detail.upper() or "SSL" in exc.detail.upper():
            hint = f"TLS failed: give the CA that signed the controller's certificate with --ca-file or ${ENV_CA_FILE}"
        return f"cannot reach the controller at {target.url}: {exc.detail}\n  {hint}"
    said = f"HTTP {exc.status} from {exc.method} {exc.url}: {exc.detail}"
    if exc.status == 401:
        said += (f"\n  the token was refused: --token-file / ${ENV_TOKEN_FILE} / ${ENV_TOKEN} must hold one of the "
                 "controller's api.tokens")
    elif exc.status == 403:
        said += "\n  this token may only read: drain, undrain, weight, pin, unpin, move and rebalance need an admin token"
    return said


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None,
         out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    environ = os.environ if env is None else env
    p = parser()
    argcomplete.autocomplete(p)  # answers and exits when the shell asks for completions
    try:
        args = p.parse_args(argv)
    except SystemExit as exc:  # argparse printed the usage error (or --help)
        return EXIT_OK if exc.code in (0, None) else EXIT_USAGE
    if args.command == "completion":
        print(completion(args.shell), file=out)
        return EXIT_OK
    try:
        target = resolve(getattr(args, "url", None), getattr(args, "token_file", None),
                         getattr(args, "ca_file", None), environ)
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=err)
        return EXIT_USAGE
    run: commands.Command = args.run
    seconds: float = getattr(args, "timeout", DEFAULT_TIMEOUT_S)
    timeout = httpx.Timeout(seconds, connect=min(seconds, CONNECT_TIMEOUT_S))
    try:
        with ControllerClient(target.url, target.token, verify=target.verify, timeout=timeout) as api:
            shown = run(api, args)
    except ApiError as exc:
        print(f"{PROG}: error: {advice(exc, target)}", file=err)
        return EXIT_API if exc.answered else EXIT_UNREACHABLE
    print(json.dumps(shown.data, indent=2) if getattr(args, "json", False) else shown.text, file=out)
    return EXIT_OK
