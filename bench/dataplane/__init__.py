"""Dataplane benchmark: eBPF switch forwarding rate on one core and P4Runtime bucket moves."""
