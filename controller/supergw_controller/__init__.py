"""supergw controller: P4Runtime control of the dispatcher."""
