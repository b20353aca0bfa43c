"""supergw gateway: strongSwan backends, tuning and the load agent."""
