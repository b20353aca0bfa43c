"""Builds supergw's Debian packages and Python wheels (`make package`); see packaging/README.md."""
