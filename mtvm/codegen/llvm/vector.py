"""Explicit SIMD vectors for the LLVM backend's loop nests.

The C writer's IR is scalar; LLVM's SLP vectorizer packs scalar statements
into vectors, but it packs along the direction of the stores, which for an
NCHW convolution is the columns -- the short direction in most layers. These
nodes let a nest say "a vector of output channels" itself: a type with lanes,
a contiguous load, a splat, a lane read. Only the LLVM lowering knows them
(lower.py); the C backend's schedules have their own intrinsic kernels.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..cwriter import Expr, Type, _expr


@dataclass(frozen=True)
class VecType(Type):
    """`lanes` values of a scalar dtype (float32: <lanes x float>)."""
    lanes: int = 8


@dataclass(frozen=True, eq=True)
class VecLoad(Expr):
    """base[index], base[index + 1], ... base[index + lanes - 1] as one vector."""
    base: Expr
    index: Expr
    lanes: int

    def __post_init__(self):
        object.__setattr__(self, "index", _expr(self.index))


@dataclass(frozen=True, eq=True)
class Splat(Expr):
    """A scalar in every lane."""
    value: Expr
    lanes: int


@dataclass(frozen=True, eq=True)
class Lane(Expr):
    """Lane i of a vector, as a scalar."""
    vector: Expr
    i: int


@dataclass(frozen=True, eq=True)
class Bitcast(Expr):
    """The same bits as another type of the same size (<16 x i32> as <32 x i16>)."""
    value: Expr
    type: Type


@dataclass(frozen=True, eq=True)
class Intrinsic(Expr):
    """A call of an LLVM target intrinsic (llvm.arm.smlad, llvm.x86.avx2.pmadd.wd):
    the argument types are the arguments' own, `type` is the result's. The
    nest that writes one checks that the target has it."""
    name: str
    args: tuple
    type: Type


@dataclass(frozen=True, eq=True)
class WordLoad(Expr):
    """The four bytes at byte pointer base + index as one int32 (little-endian),
    at any alignment (Cortex-M3 and up load unaligned words; LLVM must not
    merge such loads into LDRD, which would fault)."""
    base: Expr
    index: Expr

    def __post_init__(self):
        object.__setattr__(self, "index", _expr(self.index))


__all__ = ["Bitcast", "Intrinsic", "Lane", "Splat", "VecLoad", "VecType", "WordLoad"]
