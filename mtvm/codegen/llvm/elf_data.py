"""The weights of an LLVM-backend module as an ELF relocatable object.

The code object (lib0.o) refers to each weight array and table by a global
symbol; this writes those arrays into one data object (lib1.o) directly --
ELF's relocatable format needs only a section, its symbols and their names --
instead of pushing the bytes through LLVM IR text. Section: the constants
section asked for (--constants-section), else .rodata.tvmgen_<mod>.
"""
from __future__ import annotations

import struct

from ...target import Target

EM_X86_64, EM_ARM, EM_RISCV = 62, 40, 243
EF_ARM_EABI_VER5 = 0x05000000
EF_RISCV_RVC, EF_RISCV_FLOAT_ABI_SINGLE = 0x1, 0x2
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB = 1, 2, 3
SHF_ALLOC = 0x2
STB_GLOBAL, STT_OBJECT, STV_HIDDEN = 1, 1, 2
ALIGN = 16


def _machine(target: Target) -> tuple[int, int, int]:
    """(ELF class bits, e_machine, e_flags) matching LLVM's code object."""
    if target.is_x86:
        return 64, EM_X86_64, 0
    if target.is_arm:
        return 32, EM_ARM, EF_ARM_EABI_VER5
    if target.is_riscv:
        flags = EF_RISCV_RVC if "c" in target.isa[4:] else 0
        if "f" in target.isa[4:]:
            flags |= EF_RISCV_FLOAT_ABI_SINGLE
        return 32, EM_RISCV, flags
    raise ValueError(f"no ELF machine for target {target.name}")


def data_object(blobs: dict[str, bytes], target: Target, section: str) -> bytes:
    """An ET_REL object holding each blob 16-byte aligned in `section`, under a
    global, hidden, STT_OBJECT symbol of its name."""
    bits, machine, flags = _machine(target)
    wide = bits == 64
    data = bytearray()
    symbols = []   # (name offset, value, size)
    strtab = bytearray(b"\0")
    for name, blob in blobs.items():
        data += b"\0" * (-len(data) % ALIGN)
        symbols.append((len(strtab), len(data), len(blob)))
        strtab += name.encode() + b"\0"
        data += blob
    shstrtab = bytearray(b"\0")
    names = {}
    for s in (section, ".symtab", ".strtab", ".shstrtab"):
        names[s] = len(shstrtab)
        shstrtab += s.encode() + b"\0"
    symtab = bytearray()
    entsize = 24 if wide else 16

    def sym(name, value, size, info, other, shndx):
        if wide:
            return struct.pack("<IBBHQQ", name, info, other, shndx, value, size)
        return struct.pack("<IIIBBH", name, value, size, info, other, shndx)
    symtab += sym(0, 0, 0, 0, 0, 0)
    for name_off, value, size in symbols:
        symtab += sym(name_off, value, size, (STB_GLOBAL << 4) | STT_OBJECT, STV_HIDDEN, 1)
    ehsize = 64 if wide else 52
    shentsize = 64 if wide else 40
    # layout: header, data, symtab, strtab, shstrtab, section headers
    parts, offsets = [bytes(data), bytes(symtab), bytes(strtab), bytes(shstrtab)], []
    pos = ehsize
    blob_file = bytearray()
    for part in parts:
        pad = -pos % ALIGN
        blob_file += b"\0" * pad
        pos += pad
        offsets.append(pos)
        blob_file += part
        pos += len(part)
    pad = -pos % 8
    blob_file += b"\0" * pad
    shoff = pos + pad

    def shdr(name, typ, flags_, offset, size, link=0, info=0, align=1, entsize_=0):
        if wide:
            return struct.pack("<IIQQQQIIQQ", name, typ, flags_, 0, offset, size, link, info,
                               align, entsize_)
        return struct.pack("<IIIIIIIIII", name, typ, flags_, 0, offset, size, link, info,
                           align, entsize_)
    shdrs = shdr(0, 0, 0, 0, 0)
    shdrs += shdr(names[section], SHT_PROGBITS, SHF_ALLOC, offsets[0], len(data), align=ALIGN)
    # sh_info of a symbol table: index of its first non-local symbol (all but the null one)
    shdrs += shdr(names[".symtab"], SHT_SYMTAB, 0, offsets[1], len(symtab), link=3, info=1,
                  align=8 if wide else 4, entsize_=entsize)
    shdrs += shdr(names[".strtab"], SHT_STRTAB, 0, offsets[2], len(strtab))
    shdrs += shdr(names[".shstrtab"], SHT_STRTAB, 0, offsets[3], len(shstrtab))
    ident = b"\x7fELF" + bytes([2 if wide else 1, 1, 1, 0]) + b"\0" * 8
    if wide:
        header = ident + struct.pack("<HHIQQQIHHHHHH", 1, machine, 1, 0, 0, shoff, flags,
                                     ehsize, 0, 0, shentsize, 5, 4)
    else:
        header = ident + struct.pack("<HHIIIIIHHHHHH", 1, machine, 1, 0, 0, shoff, flags,
                                     ehsize, 0, 0, shentsize, 5, 4)
    return header + bytes(blob_file) + shdrs


__all__ = ["data_object"]
