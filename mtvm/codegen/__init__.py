"""C code generation: kernels, the AOT entry, the header and the constants."""
