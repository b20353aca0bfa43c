"""The intent store the config asks for: SQLite (`state_db`, the default) or etcd (`store.etcd`)."""

from __future__ import annotations

from supergw_controller.config import Config, StoreBackend
from supergw_controller.intent_store import IntentStore, IntentStoreApi


def build_intent_store(config: Config) -> IntentStoreApi:
    store = config.store
    if store.backend is StoreBackend.ETCD:
        from supergw_controller.etcd_store import EtcdIntentStore

        assert store.etcd is not None  # StoreConfig refuses backend etcd without it
        return EtcdIntentStore(store.etcd.endpoints, store.etcd.prefix, store.etcd.timeout_s)
    config.state_db.parent.mkdir(parents=True, exist_ok=True)
    return IntentStore(config.state_db)
