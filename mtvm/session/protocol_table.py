"""THE table of wire-protocol constants: message types, status codes, dtype
codes and header layout. It is the single definition: `mtvm.session.protocol`
builds the Python enums from it, and

    python -m mtvm.session.gen_header

generates c_runtime/include/mtvm_protocol.h from it (a test checks that the
checked-in header is up to date). Edit here, regenerate, commit both.

Status codes are `category << 8 | code` (as microTVM's error_codes.h).
"""

PROTOCOL_VERSION = 2          # 2: CRC-32 of tensor data in WRITE_INPUT/READ_OUTPUT; CANCEL; NAK
RUNTIME_VERSION = "0.1.0"

# Fixed sizes of the message headers (bytes, little-endian fields).
#   request: u8 type, u8 version, u16 seq
#   reply:   u8 type | REPLY_FLAG, u8 version, u16 seq, u32 boot_nonce, u16 status
#   log:     same header as a reply, type LOG, seq 0, status OK; body u8 level + text
#   busy:    same header as a reply, type BUSY, the executing request's seq, status OK
REQUEST_HEADER_BYTES = 4
REPLY_HEADER_BYTES = 10
REPLY_FLAG = 0x80
MIN_PACKET_BYTES = 64          # a device must accept payloads of at least this size
DEFAULT_MAX_PACKET_BYTES = 512

# name: (value, description)
MESSAGES = {
    "INFO": (0x01, "u16 item -> item 0: device/model summary; 1..n: tensors; then kernels"),
    "WRITE_INPUT": (0x02, "u16 index, u32 offset, u32 crc32, bytes -> (empty)"),
    "RUN": (0x03, "(empty) -> u64 ticks of the run, i32 model status"),
    "READ_OUTPUT": (0x04, "u16 index, u32 offset, u32 length -> u32 crc32, bytes"),
    "TIME": (0x05, "u32 number -> u32 number, u64 total ticks"),
    "PROFILE": (0x06, "u8 runs, u16 start -> u16 total, u16 start, u16 count, u64 ticks[]"),
    "ECHO": (0x07, "bytes -> the same bytes"),
    "RESET": (0x08, "u32 new_nonce -> (empty); clears tensors and the reply cache"),
    "CANCEL": (0x09, "(empty) -> (empty), once the device is idle; stops a running TIME"),
    "LOG": (0x40, "device -> host, unrequested: u8 level, UTF-8 text"),
    "BUSY": (0x41, "device -> host, unrequested: request seq is executing (RUN/TIME/PROFILE)"),
    "NAK": (0x42, "device -> host, unrequested: a packet failed its CRC (seq 0): resend now"),
}

# name: (category, code, message)
STATUS = {
    "OK": (0, 0, "success"),
    # 1: framing / link
    "BAD_CRC": (1, 1, "packet CRC mismatch"),
    "PACKET_TOO_LARGE": (1, 2, "packet larger than the device's maximum packet size"),
    "SHORT_PACKET": (1, 3, "packet shorter than a message header"),
    "BAD_DATA_CRC": (1, 4, "tensor data CRC-32 mismatch (the chunk was not stored)"),
    # 2: request
    "UNKNOWN_REQUEST": (2, 1, "unknown request type"),
    "BAD_VERSION": (2, 2, "protocol version mismatch"),
    "BAD_LENGTH": (2, 3, "request body has the wrong length"),
    "BAD_INDEX": (2, 4, "tensor, item or kernel index out of range"),
    "OUT_OF_RANGE": (2, 5, "offset/length outside the tensor"),
    "NOT_SUPPORTED": (2, 6, "not supported by this build (e.g. PROFILE without profiling)"),
    "BAD_ARGUMENT": (2, 7, "invalid argument"),
    "CANCELLED": (2, 8, "stopped by a CANCEL request"),
    # 3: model
    "MODEL_FAILED": (3, 1, "the model's run function returned a nonzero status"),
    # 4: platform
    "PLATFORM_ERROR": (4, 1, "platform failure"),
    "BAD_MODEL_DESCRIPTOR": (4, 2, "the model descriptor is inconsistent"),
}

# Tensor element types: name (numpy) -> (code, bytes per element)
DTYPES = {
    "float32": (1, 4),
    "int8": (2, 1),
    "uint8": (3, 1),
    "int16": (4, 2),
    "uint16": (5, 2),
    "int32": (6, 4),
    "uint32": (7, 4),
    "int64": (8, 8),
    "uint64": (9, 8),
    "bool": (10, 1),
    "float64": (11, 8),
    "float16": (12, 2),
}

# LOG levels (Python logging levels are these * 10).
LOG_LEVELS = {"DEBUG": 1, "INFO": 2, "WARNING": 3, "ERROR": 4}

# End-to-end check of tensor data (protocol 2): CRC-32 (IEEE 802.3, as zlib.crc32)
# over u16 index | u32 offset | the chunk's bytes, in WRITE_INPUT (computed by
# the host, verified by the device) and READ_OUTPUT replies (computed by the
# device, verified by the host).
DATA_CRC_BYTES = 4

# Both sides send this many zero bytes after every packet (ignored between
# packets): when a byte of a packet was lost they complete it at once, so the
# receiver sees a bad CRC (and resends / NAKs) instead of waiting for a timeout.
PAD_BYTES = 2
