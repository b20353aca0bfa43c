"""One router per REST resource."""
