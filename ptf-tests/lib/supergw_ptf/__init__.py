"""Target-agnostic PTF support for supergw: a generic P4Runtime base test, the
supergw helpers built on it, packet builders and the port map."""
