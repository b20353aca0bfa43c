"""Remote-access clients on the super gateway: config, gateway rendering, sessions, client, analyser."""
