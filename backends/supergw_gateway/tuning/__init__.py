"""Tuning profile from the tuning paper §5: plan, apply, verify and revert, with a state file."""
