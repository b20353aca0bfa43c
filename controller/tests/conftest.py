"""Hypothesis runs derandomized under CI (CI=true), so a landing run is reproducible;
developers' runs keep exploring new examples, and what they find becomes a plain test."""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI") == "true":
    settings.load_profile("ci")

from etcd_server import etcd_server  # noqa: E402,F401 - the real-etcd fixture, for every test here
