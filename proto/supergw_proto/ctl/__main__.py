"""`python -m supergw_proto.ctl` is `supergwctl`."""

from supergw_proto.ctl.cli import main

raise SystemExit(main())
