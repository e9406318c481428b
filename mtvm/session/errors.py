"""Session exceptions. All are MtvmError, so the CLI prints them as one line."""
from __future__ import annotations

from ..errors import MtvmError


class SessionError(MtvmError):
    """Something went wrong talking to the device."""


class SessionTimeout(SessionError):
    """The device did not answer (after all retries)."""


class TransportClosed(SessionError):
    """The link ended: the process exited, the port closed, the socket hung up."""


class DeviceReset(SessionError):
    """The device rebooted (its nonce changed): inputs written before are lost.
    The session re-synchronizes on the next call."""


class DeviceError(SessionError):
    """The device answered with an error status."""

    def __init__(self, code: int, message: str):
        self.code = int(code)
        self.message = message
        super().__init__(f"device error 0x{self.code:04x} {message}")
