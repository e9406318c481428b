/* mtvm_repeat.h: MTVM_REPEAT, a statement written once per row of a register block.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_REPEAT_H_
#define MTVM_REPEAT_H_

/* MTVM_REPEAT(n, M, x) is M(0, x) M(1, x) ... M(n - 1, x), for a literal n from 1 to 16.
 * The register-blocked micro-kernels (mtvm_gemm_f32.h) name one accumulator per row
 * (c0, c1, ...): gcc keeps named scalars in registers at -O2, where it would not unroll
 * a loop over an accumulator array. M must not use MTVM_REPEAT itself (a macro does
 * not expand inside its own expansion). */
#define MTVM_REPEAT_1(M, x) M(0, x)
#define MTVM_REPEAT_2(M, x) MTVM_REPEAT_1(M, x) M(1, x)
#define MTVM_REPEAT_3(M, x) MTVM_REPEAT_2(M, x) M(2, x)
#define MTVM_REPEAT_4(M, x) MTVM_REPEAT_3(M, x) M(3, x)
#define MTVM_REPEAT_5(M, x) MTVM_REPEAT_4(M, x) M(4, x)
#define MTVM_REPEAT_6(M, x) MTVM_REPEAT_5(M, x) M(5, x)
#define MTVM_REPEAT_7(M, x) MTVM_REPEAT_6(M, x) M(6, x)
#define MTVM_REPEAT_8(M, x) MTVM_REPEAT_7(M, x) M(7, x)
#define MTVM_REPEAT_9(M, x) MTVM_REPEAT_8(M, x) M(8, x)
#define MTVM_REPEAT_10(M, x) MTVM_REPEAT_9(M, x) M(9, x)
#define MTVM_REPEAT_11(M, x) MTVM_REPEAT_10(M, x) M(10, x)
#define MTVM_REPEAT_12(M, x) MTVM_REPEAT_11(M, x) M(11, x)
#define MTVM_REPEAT_13(M, x) MTVM_REPEAT_12(M, x) M(12, x)
#define MTVM_REPEAT_14(M, x) MTVM_REPEAT_13(M, x) M(13, x)
#define MTVM_REPEAT_15(M, x) MTVM_REPEAT_14(M, x) M(14, x)
#define MTVM_REPEAT_16(M, x) MTVM_REPEAT_15(M, x) M(15, x)
#define MTVM_REPEAT(n, M, x) MTVM_REPEAT_##n(M, x)

/* The largest n of MTVM_REPEAT (mtvm/ops/microkernels.py checks a block's rows). */
#define MTVM_REPEAT_MAX 16

#endif  /* MTVM_REPEAT_H_ */
