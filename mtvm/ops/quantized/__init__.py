"""Quantized operators, by family.

    common.py       fixed-point requantization (and its bit-exact NumPy model), the
                    C helpers every integer kernel shares, IntOp
    conv.py         QConv: im2col with the int16-column micro-kernels (Arm DSP,
                    x86 AVX2/VNNI, portable), the dense path
    depthwise.py    QConv's depthwise schedule
    matmul.py       QMatMul, QBatchMatMul
    elementwise.py  QAdd, QMul, QAffine, QLut
    pool.py         QAvgPool, QMaxPool
    resize.py       QResize (Resize on 8-bit tensors, a following requantization folded in)
    softmax.py      QSoftmax
    layernorm.py    QLayerNorm
    qoperator.py    the ONNX QOperator ops (QLinearConv, ConvInteger, QLinearMatMul,
                    MatMulInteger, com.microsoft's QLinear*), lowered to the above

The "mtvm"-domain kernels are created by the QDQ -> integer pass
(mtvm/passes/quantize.py), never read from ONNX. Importing this package
registers them all.
"""
import importlib
import pkgutil

for _m in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_m.name}")
