"""Errors the gateway reports to its operator."""


class GatewayError(Exception):
    """A failure with a message meant for the operator."""


class ConfigError(GatewayError):
    """The configuration file is missing, malformed or inconsistent."""


class CommandError(GatewayError):
    """An external command (ip, sysctl, ethtool, ...) failed."""

    def __init__(self, argv: list[str], returncode: int, stderr: str) -> None:
        self.argv = argv
        self.returncode = returncode
        self.stderr = stderr.strip()
        super().__init__(f"{' '.join(argv)} failed ({returncode}): {self.stderr}")


class TunnelError(GatewayError):
    """strongSwan refused a config or an IKE negotiation failed."""
