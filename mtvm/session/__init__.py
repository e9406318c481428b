"""Host <-> device sessions: transports, framing, the RPC client.

    sess = mtvm.Session(mtvm.transport.serial("/dev/ttyACM0"))
    print(sess.info())
    y = sess.executor.run({"input": x})
"""
from . import transport
from .client import DeviceInfo, Session, TensorInfo
from .errors import (DeviceError, DeviceReset, SessionError, SessionTimeout,
                     TransportClosed)
from .executor import BenchmarkResult, Executor, ProfileResult
from .protocol import DType, MsgType, Status

__all__ = ["Session", "transport", "DeviceInfo", "TensorInfo", "Executor", "BenchmarkResult",
           "ProfileResult", "SessionError", "SessionTimeout", "DeviceReset", "DeviceError",
           "TransportClosed", "MsgType", "Status", "DType"]
