"""The C writer's IR (mtvm.codegen.cwriter) lowered to LLVM IR with llvmlite.ir.

The second renderer the C writer was built for: the same Function, statement
and expression objects that render_c turns into C text become an LLVM
function here, with C's meaning kept exactly -- the usual arithmetic
conversions, size_t arithmetic unsigned and as wide as a pointer, comparisons
that are false on NaN (but != true), && || and ?: that evaluate lazily, libm
calls as LLVM intrinsics where LLVM has one. Locals live in allocas that
LLVM's mem2reg turns into registers; `restrict` parameters are `noalias`.

Text handed over through the writer's escape hatches (RawExpr, Raw) is read
back by cparse; what cannot be read raises NotLowerable.
"""
from __future__ import annotations

from dataclasses import dataclass

import llvmlite.ir as ir

from ..cwriter import (
    INDEX,
    VOID,
    ArrayDecl,
    Assign,
    Binary,
    Block,
    Call,
    Cast,
    Comment,
    Const,
    Decl,
    Expr,
    ExprStmt,
    For,
    Function,
    If,
    Index,
    Pragma,
    Raw,
    RawExpr,
    Return,
    Table,
    Ternary,
    Type,
    Unary,
    Var,
)
from .cparse import NotLowerable, parse_assignments, parse_expr
from .vector import Bitcast, Intrinsic, Lane, Splat, VecLoad, VecType, WordLoad

_INT_BITS = {"int8": 8, "uint8": 8, "bool": 8, "int16": 16, "uint16": 16, "int32": 32,
             "uint32": 32, "int64": 64, "uint64": 64,
             # Storage-only types: their bits, as the C backend's uint16_t/uint8_t codes
             # (only Cast converts them; ops.base.CTYPES)
             "float16": 16, "bfloat16": 16, "float8_e4m3fn": 8, "float8_e4m3fnuz": 8,
             "float8_e5m2": 8, "float8_e5m2fnuz": 8, "float8_e8m0fnu": 8,
             "float4_e2m1fn": 8, "int4": 8, "uint4": 8, "int2": 8, "uint2": 8}
_FLOATS = ("float32", "float64")
_COMPARE = {"==", "!=", "<", ">", "<=", ">="}

# libm functions (double names; the float ones end in f) -> the LLVM intrinsic
# computing them, or None for a call of the libm function itself.
_LIBM = {"exp": "llvm.exp", "exp2": "llvm.exp2", "log": "llvm.log", "log2": "llvm.log2",
         "log10": "llvm.log10", "sqrt": "llvm.sqrt", "fabs": "llvm.fabs",
         "floor": "llvm.floor", "ceil": "llvm.ceil", "trunc": "llvm.trunc",
         "rint": "llvm.rint", "nearbyint": "llvm.nearbyint", "round": "llvm.round",
         "sin": "llvm.sin", "cos": "llvm.cos", "pow": "llvm.pow", "fma": "llvm.fma",
         "copysign": "llvm.copysign", "fmax": "llvm.maxnum", "fmin": "llvm.minnum",
         "tanh": None, "erf": None, "erfc": None, "log1p": None, "expm1": None,
         "tan": None, "atan": None, "asin": None, "acos": None, "sinh": None,
         "cosh": None, "asinh": None, "acosh": None, "atanh": None, "atan2": None,
         "fmod": None, "cbrt": None, "hypot": None, "remainder": None, "lgamma": None,
         "tgamma": None}
# Kernel-library functions (c_runtime/kernels/) the LLVM backend computes with
# libm's: mtvm_exp_f32 is a libm-free expf for targets without one, within a
# float rounding of expf (softmax's tolerance), and LLVM has exp as an intrinsic;
# mtvm_tanh_f32 (mtvm_activation_f32.h) is within 4e-7 of tanhf.
_LIBRARY = {"mtvm_exp_f32": "expf", "mtvm_tanh_f32": "tanhf"}
_ARITY = {"pow": 2, "fma": 3, "copysign": 2, "fmax": 2, "fmin": 2, "atan2": 2, "fmod": 2,
          "hypot": 2, "remainder": 2}


def is_float(t: Type) -> bool:
    return not t.pointer and t.dtype in _FLOATS


def is_signed(t: Type) -> bool:
    return not t.pointer and t.dtype.startswith("int")


@dataclass
class _Value:
    v: ir.Value
    t: Type


class FunctionLowering:
    """Lowers cwriter Functions into one llvmlite module. index_bits: the width
    of size_t (the target's pointers)."""

    def __init__(self, module: ir.Module, index_bits: int, calling_convention: str = "",
                 intrinsics: frozenset | None = None):
        self.module = module
        self.index_bits = index_bits
        # The calling convention of every function and libm call ("" : the target's
        # default), and the libm intrinsics LLVM may keep (None: all of them); see
        # machine.abi for why an Arm hard-float target needs both.
        self.cconv = calling_convention
        self.intrinsics = intrinsics
        self.blobs: dict[str, bytes] = {}   # global name -> its bytes (see blob)
        self._tables = 0
        self.contract: tuple = ("contract",)    # set per function (function())

    # -- types ---------------------------------------------------------------------
    def llvm_type(self, t: Type) -> ir.Type:
        if isinstance(t, VecType):
            return ir.VectorType(self.llvm_type(Type(t.dtype)), t.lanes)
        if t.pointer:
            return self.llvm_type(Type(t.dtype)).as_pointer() if t.dtype != VOID \
                else ir.IntType(8).as_pointer()
        if t.dtype == INDEX:
            return ir.IntType(self.index_bits)
        if t.dtype == VOID:
            return ir.VoidType()
        if t.dtype == "float32":
            return ir.FloatType()
        if t.dtype == "float64":
            return ir.DoubleType()
        if t.dtype in _INT_BITS:
            return ir.IntType(_INT_BITS[t.dtype])
        raise NotLowerable(f"dtype {t.dtype} has no LLVM lowering")

    def _bits(self, t: Type) -> int:
        return self.index_bits if t.dtype == INDEX else _INT_BITS[t.dtype]

    def _rank(self, t: Type) -> int:
        return {8: 1, 16: 2, 32: 3, 64: 4}[self._bits(t)]

    def common(self, a: Type, b: Type) -> Type:
        """C's usual arithmetic conversions."""
        if is_float(a) or is_float(b):
            return Type("float64") if "float64" in (a.dtype, b.dtype) else Type("float32")
        a, b = self.promote(a), self.promote(b)
        if a.dtype == b.dtype:
            return a
        if is_signed(a) == is_signed(b):
            return a if self._rank(a) > self._rank(b) else b
        u, s = (a, b) if not is_signed(a) else (b, a)
        if self._rank(u) >= self._rank(s):
            return u
        return s   # a wider signed type holds every value of the unsigned one

    def promote(self, t: Type) -> Type:
        """Integer promotion: types narrower than int compute as int."""
        if t.pointer or is_float(t) or t.dtype == INDEX:
            return Type(t.dtype, pointer=t.pointer)
        return Type("int32") if _INT_BITS[t.dtype] < 32 else Type(t.dtype)

    def convert(self, x: _Value, to: Type) -> ir.Value:
        """x's value as type `to` (C's conversion on assignment and casts)."""
        b, src = self.b, x.t
        lt = self.llvm_type(to)
        if isinstance(to, VecType) or isinstance(x.v.type, ir.VectorType):
            return self._convert_vector(x, to)
        if to.pointer or src.pointer:
            if to.pointer and src.pointer:
                return x.v if x.v.type == lt else b.bitcast(x.v, lt)
            raise NotLowerable("a cast between a pointer and a number")
        if to.dtype == src.dtype or (x.v.type == lt and is_float(to) == is_float(src)
                                      and is_signed(to) == is_signed(src)):
            return x.v if x.v.type == lt else b.bitcast(x.v, lt)
        if is_float(src) and is_float(to):
            return b.fpext(x.v, lt) if to.dtype == "float64" else b.fptrunc(x.v, lt)
        if is_float(src):
            return b.fptosi(x.v, lt) if is_signed(to) else b.fptoui(x.v, lt)
        if is_float(to):
            return b.sitofp(x.v, lt) if is_signed(src) else b.uitofp(x.v, lt)
        fb, tb = x.v.type.width, lt.width
        if fb == tb:
            return x.v
        if fb > tb:
            return b.trunc(x.v, lt)
        return b.sext(x.v, lt) if is_signed(src) else b.zext(x.v, lt)

    def _convert_vector(self, x: _Value, to: Type) -> ir.Value:
        """Vectors convert to their own type, or integer lanes to wider integer lanes
        of the same count (sign- or zero-extended by the source's type); a scalar
        becomes a splat."""
        lt = self.llvm_type(to)
        if isinstance(x.v.type, ir.VectorType):
            if (x.v.type != lt and isinstance(to, VecType) and isinstance(x.t, VecType)
                    and x.t.lanes == to.lanes and not is_float(x.t) and not is_float(to)
                    and lt.element.width > x.v.type.element.width):
                return (self.b.sext if is_signed(x.t) else self.b.zext)(x.v, lt)
            if x.v.type != lt:
                raise NotLowerable("a conversion between vector types")
            return x.v
        return self._splat(self.convert(x, Type(to.dtype)), to.lanes)

    def _splat(self, scalar: ir.Value, lanes: int) -> ir.Value:
        vt = ir.VectorType(scalar.type, lanes)
        one = self.b.insert_element(ir.Constant(vt, ir.Undefined), scalar, ir.Constant(ir.IntType(32), 0))
        return self.b.shuffle_vector(one, ir.Constant(vt, ir.Undefined),
                                     ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes))

    # -- functions --------------------------------------------------------------------
    def function(self, f: Function, linkage: str | None = None,
                 contract: bool = True) -> ir.Function:
        """f as an LLVM function. contract: float a * b + c may become a fused
        multiply-add (IRKernel.may_contract says where it may not)."""
        self.contract = ("contract",) if contract else ()
        ftype = ir.FunctionType(self.llvm_type(f.ret), [self.llvm_type(p.type) for p in f.params])
        fn = ir.Function(self.module, ftype, f.name)
        if self.cconv:
            fn.calling_convention = self.cconv
        if linkage:
            fn.linkage = linkage
        fn.attributes.add("nounwind")
        self.fn, self.ret = fn, f.ret
        self.entry = fn.append_basic_block("entry")
        body_start = fn.append_basic_block("body")
        self.b = ir.IRBuilder(body_start)
        self.scopes = [{}]
        for p, arg in zip(f.params, fn.args):
            if p.type.pointer and p.type.restrict:
                arg.add_attribute("noalias")
            slot = self._alloca(p.type, p.name)
            self.b.store(arg, slot)
            self.scopes[-1][p.name] = (slot, p.type, False)
        self.stmts(f.body)
        if not self.b.block.is_terminated:
            if f.ret.dtype == VOID:
                self.b.ret_void()
            else:
                self.b.ret(ir.Constant(self.llvm_type(f.ret), 0))
        ir.IRBuilder(self.entry).branch(body_start)
        return fn

    def blob(self, name: str, data: bytes, section: str | None = None) -> ir.GlobalVariable:
        """A constant byte array (weights, tables), declared here as an external
        global and defined outside the IR: in the data object (elf_data) or, for
        the JIT, as a symbol on a buffer. Millions of weights as IR text cost
        more to print and parse than all the code."""
        gv = ir.GlobalVariable(self.module, ir.ArrayType(ir.IntType(8), max(len(data), 1)), name)
        gv.global_constant = True
        gv.align = 16
        if section:
            gv.section = section
        self.blobs[name] = data or b"\0"
        return gv

    def _alloca(self, t: Type, name: str) -> ir.Value:
        eb = ir.IRBuilder(self.entry)
        return eb.alloca(self.llvm_type(t), name=_safe(name))

    def _lookup(self, name: str):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        raise NotLowerable(f"name {name!r} is not declared")

    # -- statements ---------------------------------------------------------------------
    def stmts(self, body) -> None:
        for s in body:
            if self.b.block.is_terminated:   # code after a return: unreachable
                self.b.position_at_end(self.fn.append_basic_block("dead"))
            self.stmt(s)

    def stmt(self, s) -> None:
        b = self.b
        if isinstance(s, (Comment, Pragma)):
            return
        if isinstance(s, Decl):
            t = s.var.type if isinstance(s.var.type, VecType) else \
                Type(s.var.type.dtype, pointer=s.var.type.pointer, const=s.var.type.const)
            slot = self._alloca(t, s.var.name)
            if s.init is not None:
                b.store(self.convert(self.expr(s.init), t), slot)
            self.scopes[-1][s.var.name] = (slot, t, False)
        elif isinstance(s, ArrayDecl):
            t = Type(s.var.type.dtype)
            values = [self._const_value(v, t) for v in s.values]
            arr = ir.ArrayType(self.llvm_type(t), len(values))
            self._tables += 1
            gv = ir.GlobalVariable(self.module, arr, f"{self.fn.name}.table{self._tables}")
            gv.global_constant, gv.linkage = True, "internal"
            gv.initializer = ir.Constant(arr, values)
            ptr = gv.gep([ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), 0)])
            self.scopes[-1][s.var.name] = (ptr, Type(t.dtype, pointer=True, const=True), True)
        elif isinstance(s, Table):
            self._tables += 1
            gv = self.blob(f"{self.fn.name}.table{self._tables}", s.data.tobytes())
            t = Type(s.var.type.dtype, pointer=True, const=True)
            ptr = gv.bitcast(self.llvm_type(t))
            self.scopes[-1][s.var.name] = (ptr, t, True)
        elif isinstance(s, Assign):
            self.assign(s)
        elif isinstance(s, ExprStmt):
            self.expr(s.expr)
        elif isinstance(s, For):
            self.loop(s)
        elif isinstance(s, If):
            cond = self.truth(self.expr(s.cond))
            then_bb = self.fn.append_basic_block("then")
            else_bb = self.fn.append_basic_block("else") if s.otherwise else None
            end_bb = self.fn.append_basic_block("endif")
            b.cbranch(cond, then_bb, else_bb or end_bb)
            for bb, body in ((then_bb, s.then), (else_bb, s.otherwise)):
                if bb is None:
                    continue
                b.position_at_end(bb)
                self.scopes.append({})
                self.stmts(body)
                self.scopes.pop()
                if not b.block.is_terminated:
                    b.branch(end_bb)
            b.position_at_end(end_bb)
        elif isinstance(s, Block):
            self.scopes.append({})
            self.stmts(s.body)
            self.scopes.pop()
        elif isinstance(s, Return):
            if s.value is None:
                b.ret_void()
            else:
                b.ret(self.convert(self.expr(s.value), self.ret))
        elif isinstance(s, Raw):
            self.stmts(parse_assignments(s.text))
        else:
            raise NotLowerable(f"statement {type(s).__name__} has no LLVM lowering")

    def _const_value(self, e: Expr, t: Type) -> ir.Constant:
        if isinstance(e, Unary) and e.op == "-" and isinstance(e.operand, Const):
            e = Const(-e.operand.value, e.operand.dtype)
        if not isinstance(e, Const):
            raise NotLowerable("a table value that is not a number")
        v = float(e.value) if is_float(t) else int(e.value)
        return ir.Constant(self.llvm_type(t), v)

    def assign(self, s: Assign) -> None:
        target = s.target
        if isinstance(target, Var):
            slot, t, is_array = self._lookup(target.name)
            if is_array:
                raise NotLowerable(f"assignment to table {target.name}")
        elif isinstance(target, Index):
            base = self.expr(target.base)
            slot, t = self._element_ptr(base, target.index)
        else:
            raise NotLowerable("assignment to something that is not a variable or element")
        value = self.expr(s.value)
        if s.op != "=":
            current = _Value(self.b.load(slot), t)
            value = self.arith(s.op[0], current, value)
        self.b.store(self.convert(value, t), slot)

    def loop(self, s: For) -> None:
        b = self.b
        t = Type(s.var.type.dtype)
        slot = self._alloca(t, s.var.name)
        b.store(self.convert(self.expr(s.begin), t), slot)
        cond_bb = self.fn.append_basic_block("for.cond")
        body_bb = self.fn.append_basic_block("for.body")
        end_bb = self.fn.append_basic_block("for.end")
        b.branch(cond_bb)
        b.position_at_end(cond_bb)
        self.scopes.append({s.var.name: (slot, t, False)})
        i = _Value(b.load(slot), t)
        b.cbranch(self.compare("<", i, self.expr(s.end)), body_bb, end_bb)
        b.position_at_end(body_bb)
        self.scopes.append({})
        self.stmts(s.body)
        self.scopes.pop()
        if not b.block.is_terminated:
            i = _Value(b.load(slot), t)
            step = self.arith("+", i, _Value(ir.Constant(self.llvm_type(t), s.step), t))
            b.store(self.convert(step, t), slot)
            b.branch(cond_bb)
        self.scopes.pop()
        b.position_at_end(end_bb)

    # -- expressions ----------------------------------------------------------------------
    def expr(self, e: Expr) -> _Value:
        b = self.b
        if isinstance(e, Const):
            t = Type(e.dtype)
            if is_float(t):
                return _Value(ir.Constant(self.llvm_type(t), float(e.value)), t)
            v = int(e.value)
            if t.dtype == INDEX and v < 0:
                raise NotLowerable("a negative size_t constant")
            return _Value(ir.Constant(self.llvm_type(t), v & ((1 << self._bits(t)) - 1)), t)
        if isinstance(e, Var):
            slot, t, is_array = self._lookup(e.name)
            return _Value(slot if is_array else b.load(slot), t)
        if isinstance(e, RawExpr):
            return self.expr(parse_expr(e.text))
        if isinstance(e, VecLoad):
            base = self.expr(e.base)
            ptr, t = self._element_ptr(base, e.index)
            vt = VecType(t.dtype, lanes=e.lanes)
            vp = b.bitcast(ptr, self.llvm_type(vt).as_pointer())
            return _Value(b.load(vp, align=4), vt)
        if isinstance(e, Splat):
            x = self.expr(e.value)
            return _Value(self._splat(x.v, e.lanes), VecType(x.t.dtype, lanes=e.lanes))
        if isinstance(e, Lane):
            x = self.expr(e.vector)
            return _Value(b.extract_element(x.v, ir.Constant(ir.IntType(32), e.i)), Type(x.t.dtype))
        if isinstance(e, WordLoad):
            ptr, _ = self._element_ptr(self.expr(e.base), e.index)
            wp = b.bitcast(ptr, ir.IntType(32).as_pointer())
            return _Value(b.load(wp, align=1), Type("int32"))
        if isinstance(e, Bitcast):
            x = self.expr(e.value)
            return _Value(b.bitcast(x.v, self.llvm_type(e.type)), e.type)
        if isinstance(e, Intrinsic):
            args = [self.expr(a).v for a in e.args]
            fn = self.module.globals.get(e.name)
            if fn is None:
                fnty = ir.FunctionType(self.llvm_type(e.type), [a.type for a in args])
                fn = ir.Function(self.module, fnty, e.name)
            return _Value(b.call(fn, args), e.type)
        if isinstance(e, Index):
            ptr, t = self._element_ptr(self.expr(e.base), e.index)
            return _Value(b.load(ptr), t)
        if isinstance(e, Cast):
            x = self.expr(e.operand)
            to = e.type if isinstance(e.type, VecType) else Type(e.type.dtype,
                                                                 pointer=e.type.pointer)
            return _Value(self.convert(x, to), to)
        if isinstance(e, Unary):
            x = self.expr(e.operand)
            if e.op == "!":
                return self._bool(b.not_(self.truth(x)))
            t = self.promote(x.t)
            v = self.convert(x, t)
            if e.op == "-":
                return _Value(b.fneg(v) if is_float(t) else b.neg(v), t)
            if e.op == "~" and not is_float(t):
                return _Value(b.not_(v), t)
            raise NotLowerable(f"unary {e.op}")
        if isinstance(e, Binary):
            if e.op in ("&&", "||"):
                return self.logical(e)
            left, right = self.expr(e.left), self.expr(e.right)
            if e.op in _COMPARE:
                return self._bool(self.compare(e.op, left, right))
            return self.arith(e.op, left, right)
        if isinstance(e, Ternary):
            return self.ternary(e)
        if isinstance(e, Call):
            return self.call(e)
        raise NotLowerable(f"expression {type(e).__name__} has no LLVM lowering")

    def _element_ptr(self, base: _Value, index: Expr) -> tuple[ir.Value, Type]:
        if not base.t.pointer:
            raise NotLowerable("indexing something that is not a pointer")
        i = self.expr(index)
        if is_float(i.t):
            raise NotLowerable("a float index")
        idx = self.convert(i, Type("int64" if is_signed(i.t) else INDEX)) \
            if self.index_bits == 64 else self.convert(i, Type(INDEX))
        return self.b.gep(base.v, [idx]), Type(base.t.dtype)

    def _bool(self, bit: ir.Value) -> _Value:
        return _Value(self.b.zext(bit, ir.IntType(32)), Type("int32"))

    def truth(self, x: _Value) -> ir.Value:
        """An i1: x != 0 (C's condition)."""
        if isinstance(x.v.type, ir.IntType) and x.v.type.width == 1:
            return x.v
        if is_float(x.t):
            return self.b.fcmp_unordered("!=", x.v, ir.Constant(x.v.type, 0.0))
        if x.t.pointer:
            raise NotLowerable("a pointer as a condition")
        return self.b.icmp_unsigned("!=", x.v, ir.Constant(x.v.type, 0))

    def compare(self, op: str, a: _Value, c: _Value) -> ir.Value:
        t = self.common(a.t, c.t)
        x, y = self.convert(a, t), self.convert(c, t)
        if is_float(t):
            # C: every comparison with a NaN is false, except != (true).
            return (self.b.fcmp_unordered(op, x, y) if op == "!="
                    else self.b.fcmp_ordered(op, x, y))
        if is_signed(t):
            return self.b.icmp_signed(op, x, y)
        return self.b.icmp_unsigned(op, x, y)

    def arith(self, op: str, a: _Value, c: _Value) -> _Value:
        b = self.b
        if op in ("<<", ">>"):
            t = self.promote(a.t)
            x = self.convert(a, t)
            y = self.convert(c, t)
            if op == "<<":
                return _Value(b.shl(x, y), t)
            return _Value(b.ashr(x, y) if is_signed(t) else b.lshr(x, y), t)
        if a.t.pointer or c.t.pointer:
            return self._pointer_arith(op, a, c)
        vec = a.t if isinstance(a.t, VecType) else c.t if isinstance(c.t, VecType) else None
        if vec is not None:   # lane by lane; a scalar operand is splat
            x, y = self.convert(a, vec), self.convert(c, vec)
            if not is_float(vec):   # integer lanes wrap, as int32 arithmetic does
                if op not in ("+", "-", "*"):
                    raise NotLowerable(f"vector {op} on {vec.dtype}")
                return _Value({"+": b.add, "-": b.sub, "*": b.mul}[op](x, y), vec)
            if op not in ("+", "-", "*", "/"):
                raise NotLowerable(f"vector {op} on {vec.dtype}")
            fop = {"+": b.fadd, "-": b.fsub, "*": b.fmul, "/": b.fdiv}[op]
            return _Value(fop(x, y, flags=self.contract), vec)
        t = self.common(a.t, c.t)
        x, y = self.convert(a, t), self.convert(c, t)
        if is_float(t):
            if op in ("+", "-", "*"):
                # `contract`: a * b + c may become one fused multiply-add, as gcc
                # does by default for C outside ISO mode (-ffp-contract=fast).
                fop = {"+": b.fadd, "-": b.fsub, "*": b.fmul}[op]
                return _Value(fop(x, y, flags=self.contract), t)
            fn = {"/": b.fdiv, "%": b.frem}.get(op)
        elif is_signed(t):
            fn = {"+": b.add, "-": b.sub, "*": b.mul, "/": b.sdiv, "%": b.srem,
                  "&": b.and_, "|": b.or_, "^": b.xor}.get(op)
        else:
            fn = {"+": b.add, "-": b.sub, "*": b.mul, "/": b.udiv, "%": b.urem,
                  "&": b.and_, "|": b.or_, "^": b.xor}.get(op)
        if fn is None:
            raise NotLowerable(f"operator {op} on {t.dtype}")
        return _Value(fn(x, y), t)

    def _pointer_arith(self, op: str, a: _Value, c: _Value) -> _Value:
        """p + n, n + p, p - n: an element offset (a GEP)."""
        if c.t.pointer and op == "+":
            a, c = c, a
        if c.t.pointer or op not in ("+", "-") or is_float(c.t):
            raise NotLowerable(f"pointer arithmetic {op}")
        wide = Type("int64" if is_signed(c.t) else INDEX) if self.index_bits == 64 else Type(INDEX)
        n = self.convert(c, wide)
        if op == "-":
            n = self.b.neg(n)
        return _Value(self.b.gep(a.v, [n]), a.t)

    def _python_mod(self, a: _Value, c: _Value, t: Type) -> _Value:
        """Mod with fmod=0 on floats (the C helper mtvm_pymod[f]): the remainder with
        the divisor's sign -- r = fmod(a, b); r == 0 ? copysign(0, b) :
        ((r < 0) != (b < 0) ? r + b : r)."""
        b = self.b
        x, y = self.convert(a, t), self.convert(c, t)
        zero = ir.Constant(x.type, 0.0)
        r = b.frem(x, y)
        copysign = self.module.declare_intrinsic("llvm.copysign", [x.type],
                                                 ir.FunctionType(x.type, [x.type, x.type]))
        signed_zero = b.call(copysign, [zero, y])
        differ = b.xor(b.fcmp_ordered("<", r, zero), b.fcmp_ordered("<", y, zero))
        adjusted = b.select(differ, b.fadd(r, y), r)
        return _Value(b.select(b.fcmp_ordered("==", r, zero), signed_zero, adjusted), t)

    def logical(self, e: Binary) -> _Value:
        """&& and ||: the right operand is evaluated only when it decides."""
        b = self.b
        left = self.truth(self.expr(e.left))
        start = b.block
        rhs_bb = self.fn.append_basic_block("logic.rhs")
        end_bb = self.fn.append_basic_block("logic.end")
        if e.op == "&&":
            b.cbranch(left, rhs_bb, end_bb)
        else:
            b.cbranch(left, end_bb, rhs_bb)
        b.position_at_end(rhs_bb)
        right = self.truth(self.expr(e.right))
        rhs_end = b.block
        b.branch(end_bb)
        b.position_at_end(end_bb)
        phi = b.phi(ir.IntType(1))
        phi.add_incoming(ir.Constant(ir.IntType(1), 0 if e.op == "&&" else 1), start)
        phi.add_incoming(right, rhs_end)
        return self._bool(phi)

    def ternary(self, e: Ternary) -> _Value:
        b = self.b
        cond = self.truth(self.expr(e.cond))
        if _pure(e.then) and _pure(e.otherwise):
            x, y = self.expr(e.then), self.expr(e.otherwise)
            t = x.t if x.t.pointer else self.common(x.t, y.t)
            return _Value(b.select(cond, self.convert(x, t), self.convert(y, t)), t)
        # A load may be out of bounds on the side not taken: branch, as C evaluates.
        then_bb = self.fn.append_basic_block("sel.then")
        else_bb = self.fn.append_basic_block("sel.else")
        end_bb = self.fn.append_basic_block("sel.end")
        b.cbranch(cond, then_bb, else_bb)
        results = []
        for bb, side in ((then_bb, e.then), (else_bb, e.otherwise)):
            b.position_at_end(bb)
            results.append(self.expr(side))
            results[-1] = (results[-1], b.block)
        t = self.common(results[0][0].t, results[1][0].t)
        converted = []
        for (value, block) in results:
            b.position_at_end(block)
            converted.append((self.convert(value, t), b.block))
            b.branch(end_bb)
        b.position_at_end(end_bb)
        phi = b.phi(self.llvm_type(t))
        for v, block in converted:
            phi.add_incoming(v, block)
        return _Value(phi, t)

    def call(self, e: Call) -> _Value:
        b = self.b
        name = e.func
        args = [self.expr(a) for a in e.args]
        if name in ("isnan", "isinf", "isfinite", "signbit") and len(args) == 1:
            x = args[0]
            if not is_float(x.t):
                raise NotLowerable(f"{name} of {x.t.dtype}")
            if name == "isnan":
                return self._bool(b.fcmp_unordered("uno", x.v, x.v))
            if name == "signbit":
                bits = b.bitcast(x.v, ir.IntType(32 if x.t.dtype == "float32" else 64))
                return self._bool(b.icmp_signed("<", bits, ir.Constant(bits.type, 0)))
            fabs = self.module.declare_intrinsic("llvm.fabs", [x.v.type])
            inf = ir.Constant(x.v.type, float("inf"))
            mag = b.call(fabs, [x.v])
            return self._bool(b.fcmp_ordered("==" if name == "isinf" else "<", mag, inf))
        if name in ("mtvm_pymodf", "mtvm_pymod") and len(args) == 2:
            return self._python_mod(*args, Type("float32" if name.endswith("f") else "float64"))
        if name in _LIBRARY:   # a kernel-library function LLVM has as an intrinsic
            name = _LIBRARY[name]
        base, t = (name[:-1], Type("float32")) if name.endswith("f") and name[:-1] in _LIBM \
            else (name, Type("float64"))
        if base not in _LIBM or len(args) != _ARITY.get(base, 1):
            raise NotLowerable(f"call of {name}")
        lt = self.llvm_type(t)
        values = [self.convert(a, t) for a in args]
        intrinsic = _LIBM[base]
        if intrinsic is not None and (self.intrinsics is None or intrinsic in self.intrinsics):
            fn = self.module.declare_intrinsic(intrinsic, [lt],
                                               ir.FunctionType(lt, [lt] * len(values)))
            return _Value(b.call(fn, values), t)
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(lt, [lt] * len(values)), name)
            fn.attributes.add("nounwind")
            if self.cconv:
                fn.calling_convention = self.cconv
        return _Value(b.call(fn, values, cconv=self.cconv or None), t)


def _pure(e: Expr) -> bool:
    """Whether evaluating e cannot fault or have an effect (so both sides of a
    ?: may be computed): no loads, no calls (libm may set errno)."""
    if isinstance(e, (Const, Var)):
        return True
    if isinstance(e, (Index, Call, RawExpr)):
        return False
    if isinstance(e, Unary):
        return _pure(e.operand)
    if isinstance(e, Cast):
        return _pure(e.operand)
    if isinstance(e, Binary):
        if e.op in ("/", "%"):
            return False   # an integer division by zero on the side not taken
        return _pure(e.left) and _pure(e.right)
    if isinstance(e, Ternary):
        return _pure(e.cond) and _pure(e.then) and _pure(e.otherwise)
    return False


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "v"


__all__ = ["FunctionLowering", "NotLowerable"]
