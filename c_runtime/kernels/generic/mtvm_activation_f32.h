/* mtvm_activation_f32.h: tanh and the logistic sigmoid in float without libm, for the
 * gates of the recurrent kernels (evaluated GH times per time step).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_ACTIVATION_F32_H_
#define MTVM_ACTIVATION_F32_H_

/* p * x + c: one fused multiply-add where the target has a fast one (VFMA on the
 * Cortex-M4F/M7/M33, FMA3 on x86), else the two operations. The results differ in the
 * last bits between the two; both keep the bounds below (tested with and without). */
#if defined(__GNUC__) && defined(__FP_FAST_FMAF)
#define MTVM_ACT_MADD(p, x, c) __builtin_fmaf((p), (x), (c))
#else
#define MTVM_ACT_MADD(p, x, c) ((p) * (x) + (c))
#endif

/* tanh(x) as the rational function x P(x^2) / Q(x^2) (degrees 9 and 8), fitted by
 * mtvm (weighted least squares, Loeb iteration) on [0, 9]: relative error below
 * 4e-7 in float arithmetic everywhere, against the about 150 instructions of a
 * libm tanhf on a Cortex-M4F. |x| >= 8 gives tanh(+-8) = +-0.99999977 (1 - tanh(x) < 2.3e-7
 * beyond). The bound keeps the result in [-1, 1] without a clamp of its own: every float
 * of [0, 8] was evaluated, with the fused multiply-adds and without, and none gives more
 * than 1, where from 8.0753 on some do (tests/kernels/test_dense_kernels.py evaluates
 * every float of [6, 8.5], where the function comes within rounding of 1, on the host
 * and the boards). On the Cortex-M4F the gates of a 16-unit LSTM took 38 instructions an
 * activation, half of its time; the comparisons of that clamp (VCMP, VMRS, IT, VMOV each)
 * and the separate multiplies and adds were 10 of them. NaN propagates. */
static inline float mtvm_tanh_f32(float x)
{
    const float c = x > 8.0f ? 8.0f : (x < -8.0f ? -8.0f : x);
    const float x2 = c * c;
    float p = 1.37056677e-08f;
    p = MTVM_ACT_MADD(p, x2, 2.08651527e-05f);
    p = MTVM_ACT_MADD(p, x2, 3.51127703e-03f);
    p = MTVM_ACT_MADD(p, x2, 1.33942828e-01f);
    p = MTVM_ACT_MADD(p, x2, 1.0f);
    float q = 7.92102014e-07f;
    q = MTVM_ACT_MADD(q, x2, 3.31120042e-04f);
    q = MTVM_ACT_MADD(q, x2, 2.59368103e-02f);
    q = MTVM_ACT_MADD(q, x2, 4.67276037e-01f);
    q = MTVM_ACT_MADD(q, x2, 1.0f);
    /* a NaN x passes both clamps (every comparison with it is false): NaN out */
    return c * p / q;
}

/* 1 / (1 + e^-x) = (1 + tanh(x / 2)) / 2 = 1/2 + x P(x^2 / 4) / (4 Q(x^2 / 4)), the same
 * function with P's coefficients divided by 4^(k + 1) and Q's by 4^k: powers of two, so
 * every intermediate is the tanh's scaled exactly and the result is bit for bit
 * 0.5f + 0.5f * mtvm_tanh_f32(0.5f * x), in [0, 1], two multiplies fewer. Absolute error
 * below 2e-7. */
static inline float mtvm_sigmoid_f32(float x)
{
    const float c = x > 16.0f ? 16.0f : (x < -16.0f ? -16.0f : x);
    const float x2 = c * c;
    float p = 1.3384441e-11f;
    p = MTVM_ACT_MADD(p, x2, 8.15045e-08f);
    p = MTVM_ACT_MADD(p, x2, 5.4863704e-05f);
    p = MTVM_ACT_MADD(p, x2, 8.371427e-03f);
    p = MTVM_ACT_MADD(p, x2, 0.25f);
    float q = 3.0941485e-09f;
    q = MTVM_ACT_MADD(q, x2, 5.1737507e-06f);
    q = MTVM_ACT_MADD(q, x2, 1.6210506e-03f);
    q = MTVM_ACT_MADD(q, x2, 1.1681901e-01f);
    q = MTVM_ACT_MADD(q, x2, 1.0f);
    return 0.5f + c * p / q;
}

#endif  /* MTVM_ACTIVATION_F32_H_ */
