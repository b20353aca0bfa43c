"""P4Runtime side of the controller: entity builders, the switch session, reconciliation."""
