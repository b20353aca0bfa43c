"""Replicated controllers: leadership from etcd, fencing, fast takeover (issue 9).

- `term`: the P4Runtime election id of an etcd term (the leader key's create_revision).
- `fence`: the local "lease valid until" deadline every write path checks.
- `southbound/arbitration.py` (beside the other finsy code): arbitration that never bids on
  its own (a backup holds a stream without an election id; only the etcd leader claims
  primary, with its term's id), as the replica's `ReplicaStream`.
- `leadership`: the etcd side: campaign, keep-alive, watch, resign, revoke a dead leader.
- `replica`: the replica's state machine, tied to the core (`compose.ReplicaCore`).
- `gate`: what a backup refuses (admin writes, naming the leader): placement's write check.
"""
