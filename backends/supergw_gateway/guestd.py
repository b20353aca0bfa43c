"""Exec service inside a UML gateway guest: one JSON request per connection.

Listens only on the guest's management link, which exists only inside the gateway's
own network namespace. Request: {"argv": [...], "timeout": s}; reply: {"rc", "stdout", "stderr"}.
"""

from __future__ import annotations

import argparse
import json
import socketserver
import subprocess


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        try:
            req = json.loads(self.rfile.read())
            argv = [str(a) for a in req["argv"]]
            p = subprocess.run(argv, capture_output=True, text=True, timeout=float(req.get("timeout", 30)))
            reply = {"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr}
        except FileNotFoundError as exc:
            reply = {"rc": 127, "stdout": "", "stderr": f"{exc.filename}: command not found"}
        except (ValueError, KeyError, TypeError, subprocess.TimeoutExpired) as exc:
            reply = {"error": f"bad request: {exc}"}
        self.wfile.write(json.dumps(reply).encode())


class _Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--listen", required=True, help="ADDRESS:PORT")
    a = ap.parse_args()
    host, port = a.listen.rsplit(":", 1)
    with _Server((host, int(port)), _Handler) as srv:
        srv.serve_forever()


if __name__ == "__main__":
    main()
