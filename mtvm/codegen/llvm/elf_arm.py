"""Mark an Arm ELF object as passing floats in VFP registers.

LLVM's object for a hard-float Arm target (see machine.abi) does pass floats
in VFP registers, through the arm_aapcs_vfpcc convention on every function,
but llvmlite cannot tell LLVM's backend, so the object's build attributes say
"base AAPCS" and GNU ld refuses to link it with -mfloat-abi=hard objects
("uses VFP register arguments, lib0.o does not"). This adds the build
attribute Tag_ABI_VFP_args = 1 (ARM IHI 0045, "Addenda to the ARM ELF") to
the .ARM.attributes section: the section's new contents go at the end of the
file and its header points there, so no other section moves."""
from __future__ import annotations

import struct

TAG_FILE = 1
TAG_ABI_VFP_ARGS = 28


def _uleb(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def mark_vfp_args(obj: bytes) -> bytes:
    """obj with Tag_ABI_VFP_args = 1 in its "aeabi" File attributes."""
    data = bytearray(obj)
    if data[:4] != b"\x7fELF" or data[4] != 1 or data[5] != 1:
        raise ValueError("not a 32-bit little-endian ELF object")
    shoff, = struct.unpack_from("<I", data, 0x20)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x2E)
    names_at = struct.unpack_from("<I", data, shoff + shstrndx * shentsize + 16)[0]
    for i in range(shnum):
        head = shoff + i * shentsize
        name, _, _, _, offset, size = struct.unpack_from("<IIIIII", data, head)
        end = data.index(b"\0", names_at + name)
        if bytes(data[names_at + name:end]) == b".ARM.attributes":
            break
    else:
        raise ValueError("no .ARM.attributes section")
    old = bytes(data[offset:offset + size])
    if old[:1] != b"A":
        raise ValueError("unknown build attributes format")
    sub_len, = struct.unpack_from("<I", old, 1)
    vendor_end = old.index(b"\0", 5) + 1
    if old[5:vendor_end - 1] != b"aeabi":
        raise ValueError("the first attributes subsection is not aeabi")
    tag, pos = _uleb(old, vendor_end)
    if tag != TAG_FILE:
        raise ValueError("the aeabi attributes do not start with File")
    file_len, = struct.unpack_from("<I", old, pos)
    file_end = vendor_end + file_len
    # Is the tag already there? Walk the File attributes (ULEB tag, then a ULEB
    # value, or a NUL-terminated string for tag 4, 5, 67 and odd tags above 32).
    p = pos + 4
    while p < file_end:
        t, p = _uleb(old, p)
        if t == TAG_ABI_VFP_ARGS:
            return obj
        if t in (4, 5, 67) or (t > 32 and t % 2):
            p = old.index(b"\0", p) + 1
        else:
            _, p = _uleb(old, p)
    extra = bytes([TAG_ABI_VFP_ARGS, 1])
    new = bytearray(old[:file_end] + extra + old[file_end:])
    struct.pack_into("<I", new, 1, sub_len + len(extra))
    struct.pack_into("<I", new, pos, file_len + len(extra))
    new_offset = len(data)
    data += new
    struct.pack_into("<II", data, head + 16, new_offset, len(new))
    return bytes(data)


__all__ = ["mark_vfp_args"]
