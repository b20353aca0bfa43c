"""Hypothesis runs derandomized under CI (CI=true), so a landing run is reproducible;
developers' runs keep exploring new examples, and what they find becomes a plain test."""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI") == "true":
    settings.load_profile("ci")
