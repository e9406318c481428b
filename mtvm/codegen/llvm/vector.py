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


__all__ = ["Lane", "Splat", "VecLoad", "VecType"]
