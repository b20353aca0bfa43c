"""State replication between gateways: the relay of strongSwan ha sync messages and the takeover (docs/DESIGN.md, "Stateful takeover")."""
