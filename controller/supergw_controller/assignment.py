"""Initial bucket assignment: smooth weighted round robin over the eligible gateways, of
every bucket or of the classes b % period."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def weighted_round_robin(buckets: Sequence[int], weights: Mapping[str, float]) -> dict[int, str]:
    """Spread `buckets` over gateways in proportion to their weights, interleaved.

    Smooth WRR (as in nginx): each step every gateway gains its weight, the richest is
    picked and pays the total. Deterministic: ties go to the first name in sorted order.
    """
    names = sorted(n for n, w in weights.items() if w > 0)
    if not names:
        return {}
    total = sum(weights[n] for n in names)
    credit = dict.fromkeys(names, 0.0)
    out: dict[int, str] = {}
    for b in buckets:
        for n in names:
            credit[n] += weights[n]
        pick = max(names, key=lambda n: (credit[n], -names.index(n)))
        credit[pick] -= total
        out[b] = pick
    return out


def fill_missing(
    k: int, current: Mapping[int, str], eligible_weights: Mapping[str, float], period: int | None = None
) -> dict[int, str]:
    """Keep every valid current assignment; give the buckets without one to the eligible
    gateways so that each ends near its weighted share of all K buckets.

    With `period` (< k), the missing buckets are shared out by class ``b % period``: the WRR
    runs over the classes and every missing bucket of a class goes where its class goes. On
    an empty switch with equal weights bucket b starts on gateway ``(b % period) % N``, so
    the partition of K buckets is the partition of `period` buckets repeated (the clustering
    paper's K = 256 partition under K = 4096, docs/pipeline-contract.md).
    """
    result = {b: g for b, g in current.items() if 0 <= b < k}
    missing = [b for b in range(k) if b not in result]
    if not missing or not eligible_weights:
        return result
    total_w = sum(eligible_weights.values())
    have = {n: sum(1 for g in result.values() if g == n) for n in eligible_weights}
    # How far below its share each gateway is, as the weight of a WRR over the missing ones.
    deficit = {n: max(0.0, k * w / total_w - have[n]) for n, w in eligible_weights.items()}
    if sum(deficit.values()) <= 0:
        deficit = dict(eligible_weights)
    if period is None or period >= k:
        result.update(weighted_round_robin(missing, deficit))
        return result
    owner = weighted_round_robin(sorted({b % period for b in missing}), deficit)
    result.update({b: owner[b % period] for b in missing})
    return result
