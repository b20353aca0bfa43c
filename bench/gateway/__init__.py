"""Gateway benchmark: IPsec/plain TCP ratios, IKE handshakes per second, capacity by CPU quota."""
