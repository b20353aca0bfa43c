"""Each IKE SA's history as sync messages (pure state, no I/O).

A *lineage* is one client's IKE SA through its rekeys: the IKE_ADD that made it, its updates
(identities, config name, virtual IPs), the IKE_ADDs of its rekeys (each carries the old
SA's SK_d, and the children the old SA had move to the new one), the CHILD_ADDs of its live
CHILD SAs and the last message IDs. Replayed in order into a charon that never saw it, the
history rebuilds the SA exactly as a charon that listened all along has it: that is how a
new backup gets a full copy without a rekey.

A `SaBook` keeps the lineages of one source: this gateway's own charon, or the gateway this
one protects. Only lineages of the remote-access connection are kept and relayed; the rest
(site-to-site SAs) are dropped as soon as their config name is known, and messages of an IKE
SA whose config name is not known yet wait (an IKE_ADD comes before the IKE_UPDATE that
names its config).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from supergw_gateway.statesync.hamsg import HaMessage, IkeSaId, MsgType

# Message types a lineage keeps only the latest of, per IKE SA id.
_LATEST_ONLY = frozenset({MsgType.IKE_MID_INITIATOR, MsgType.IKE_MID_RESPONDER, MsgType.IKE_IV})


@dataclass
class Lineage:
    current: IkeSaId
    ids: set[IkeSaId] = field(default_factory=set)  # every IKE SA id of the lineage still alive
    config: str | None = None
    messages: list[HaMessage] = field(default_factory=list)

    def replace_latest(self, msg: HaMessage) -> None:
        self.messages = [m for m in self.messages if not (m.type is msg.type and m.ike_id == msg.ike_id)]
        self.messages.append(msg)

    def drop_child(self, inbound_spi: int) -> None:
        # By SPI alone: a CHILD SA made before an IKE rekey was added under the old IKE SA's id
        # and moved to the new one, whose id its CHILD_DELETE carries.
        self.messages = [m for m in self.messages
                         if not (m.type is MsgType.CHILD_ADD and m.inbound_spi == inbound_spi)]


@dataclass(frozen=True)
class Outcome:
    """What to do with a message after the book took it."""

    relay: tuple[HaMessage, ...]  # messages to send on now (held back ones included, in order)
    ended: IkeSaId | None = None  # a lineage that ended with this message


class SaBook:
    """The remote-access lineages of one source, by IKE SA id."""

    def __init__(self, config: str) -> None:
        self.config = config  # the remote-access connection's name: the only one kept
        self._by_id: dict[IkeSaId, Lineage] = {}
        self._ignored: set[IkeSaId] = set()  # IKE SAs of other configs
        self._pending: dict[IkeSaId, Lineage] = {}  # config name not known yet

    # ------------------------------------------------------------------ views
    def lineages(self) -> list[Lineage]:
        seen: dict[int, Lineage] = {}
        for lin in self._by_id.values():
            seen.setdefault(id(lin), lin)
        return list(seen.values())

    def __len__(self) -> int:
        return len(self.lineages())

    def replay(self) -> Iterator[HaMessage]:
        """Every message of every lineage, each lineage in its order."""
        for lin in self.lineages():
            yield from lin.messages

    def current_ids(self) -> list[IkeSaId]:
        return [lin.current for lin in self.lineages()]

    def all_ids(self) -> list[IkeSaId]:
        return [i for lin in self.lineages() for i in sorted(lin.ids, key=lambda x: x.raw)]

    # ------------------------------------------------------------------ input
    def take(self, msg: HaMessage) -> Outcome:
        """Book one message of this source; say what to relay."""
        if msg.ike_id is None or msg.type in (MsgType.SEGMENT_DROP, MsgType.SEGMENT_TAKE, MsgType.STATUS,
                                              MsgType.RESYNC):
            return Outcome(())  # segment control is between an agent and its own charon only
        ike = msg.ike_id
        if ike in self._ignored:
            if msg.type is MsgType.IKE_DELETE:
                self._ignored.discard(ike)
            return Outcome(())
        if msg.type is MsgType.IKE_ADD:
            return self._add(msg, ike)
        lin = self._by_id.get(ike) or self._pending.get(ike)
        if lin is None:
            return Outcome(())  # an SA whose IKE_ADD we never saw: nothing to rebuild it from
        if msg.type is MsgType.IKE_UPDATE and msg.config_name is not None and lin.config is None:
            return self._named(lin, msg)
        pending = ike in self._pending
        ended: IkeSaId | None = None
        if msg.type in _LATEST_ONLY:
            lin.replace_latest(msg)
        elif msg.type is MsgType.CHILD_DELETE:
            if msg.inbound_spi is not None:
                lin.drop_child(msg.inbound_spi)
        elif msg.type is MsgType.IKE_DELETE:
            ended = self._delete(lin, ike)
        else:
            lin.messages.append(msg)
        return Outcome(() if pending else (msg,), ended)

    def _add(self, msg: HaMessage, ike: IkeSaId) -> Outcome:
        old = self._by_id.get(msg.rekey_of) if msg.rekey_of is not None else None
        if old is None and msg.rekey_of is not None and msg.rekey_of in self._ignored:
            self._ignored.add(ike)  # a rekey of an SA of another config
            return Outcome(())
        if old is not None:
            old.ids.add(ike)
            old.current = ike
            old.messages.append(msg)
            self._by_id[ike] = old
            return Outcome((msg,))
        lin = Lineage(current=ike, ids={ike}, messages=[msg])
        self._pending[ike] = lin
        return Outcome(())

    def _named(self, lin: Lineage, msg: HaMessage) -> Outcome:
        lin.config = msg.config_name
        lin.messages.append(msg)
        for i in lin.ids:
            self._pending.pop(i, None)
        if lin.config != self.config:
            self._ignored |= lin.ids
            return Outcome(())
        for i in lin.ids:
            self._by_id[i] = lin
        return Outcome(tuple(lin.messages))

    def _delete(self, lin: Lineage, ike: IkeSaId) -> IkeSaId | None:
        lin.ids.discard(ike)
        self._pending.pop(ike, None)
        self._by_id.pop(ike, None)
        if lin.ids:
            return None  # the old SA of a rekey: the lineage lives on in the new one
        return ike

    # ------------------------------------------------------------------ whole lineages
    def adopt(self, other: SaBook) -> list[Lineage]:
        """Move every lineage of `other` into this book (a takeover: the held SAs are this
        gateway's own now); returns them."""
        moved = other.lineages()
        for lin in moved:
            for i in lin.ids:
                self._by_id[i] = lin
        other.clear()
        return moved

    def clear(self) -> None:
        self._by_id.clear()
        self._pending.clear()
        self._ignored.clear()
