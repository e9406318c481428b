"""Graph -> Graph passes. Each keeps interp(before) == interp(after)."""
from .simplify import remove_identities, eliminate_dead, fold_constants, mark_aliases
from .batchnorm import fold_batchnorm
from .conv_transpose import decompose_conv_transpose
from .fusion import fuse_elementwise_tails
from .widen import widen_half
from .quantize import lower_quantized
from .integer_tables import tabulate_integer_cones
from .layernorm import fuse_layernorm
from .matmul_bias import fold_matmul_bias_adds

__all__ = ["optimize", "remove_identities", "eliminate_dead", "fold_constants",
           "mark_aliases", "fold_batchnorm", "decompose_conv_transpose",
           "fuse_elementwise_tails", "widen_half", "tabulate_integer_cones", "fuse_layernorm",
           "fold_matmul_bias_adds"]

PIPELINE = [widen_half, remove_identities, fuse_layernorm, lower_quantized, fold_constants,
            fold_batchnorm,
            fold_constants, decompose_conv_transpose, eliminate_dead, tabulate_integer_cones,
            fold_matmul_bias_adds, eliminate_dead, mark_aliases, fuse_elementwise_tails]

# Passes whose result only the C backend's kernels compute (the LLVM backend's nests
# take the graph without them).
C_ONLY = (fold_matmul_bias_adds,)


def optimize(graph, fuse: bool = True, backend: str = "c"):
    for p in PIPELINE:
        if p is fuse_elementwise_tails and not fuse:
            continue
        if p in C_ONLY and backend != "c":
            continue
        graph = p(graph)
    return graph
