"""The intent store the config asks for: SQLite (`state_db`, the default) or etcd (`store.etcd`)."""

from __future__ import annotations

from supergw_controller.config import Config, ConfigError, EtcdStoreConfig, StoreBackend
from supergw_controller.etcd_tls import EtcdTls, EtcdTlsError, load_etcd_tls
from supergw_controller.intent_store import IntentStore, IntentStoreApi


def etcd_tls(etcd: EtcdStoreConfig) -> EtcdTls | None:
    """The TLS material of store.etcd.tls, read now: a bad file is a ConfigError at start."""
    if etcd.tls is None:
        return None
    t = etcd.tls
    try:
        return load_etcd_tls(t.cacert, t.cert, t.key, t.server_name)
    except EtcdTlsError as exc:
        raise ConfigError(str(exc)) from None


def build_intent_store(config: Config) -> IntentStoreApi:
    store = config.store
    if store.backend is StoreBackend.ETCD:
        from supergw_controller.etcd_store import EtcdIntentStore

        assert store.etcd is not None  # StoreConfig refuses backend etcd without it
        return EtcdIntentStore(store.etcd.endpoints, store.etcd.prefix, store.etcd.timeout_s, tls=etcd_tls(store.etcd))
    config.state_db.parent.mkdir(parents=True, exist_ok=True)
    return IntentStore(config.state_db)
