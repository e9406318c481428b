/* mtvm_activation_f32.h: tanh and the logistic sigmoid in float without libm, for the
 * gates of the recurrent kernels (evaluated GH times per time step).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_ACTIVATION_F32_H_
#define MTVM_ACTIVATION_F32_H_

/* p * x + c: one fused multiply-add where the target has a fast one (VFMA on the
 * Cortex-M4F/M7/M33, where it replaces a VMUL and a VADD: 8 instructions an evaluation;
 * FMA3 on x86), else the two operations. The results differ in the last bits between the
 * two; both keep the bounds below (tested with and without). */
#if defined(__GNUC__) && defined(__FP_FAST_FMAF)
#define MTVM_ACT_MADD(p, x, c) __builtin_fmaf((p), (x), (c))
#else
#define MTVM_ACT_MADD(p, x, c) ((p) * (x) + (c))
#endif

/* x P(x^2) / Q(x^2) for P = p4 y^4 + ... + p0, Q = q4 y^4 + ... + q0 by Horner (the
 * coefficients arguments, not a table: inlined, they stay the instructions' literals). */
static inline float mtvm_act_rational(float x, float p4, float p3, float p2, float p1,
                                      float p0, float q4, float q3, float q2, float q1,
                                      float q0)
{
    const float x2 = x * x;
    const float p = MTVM_ACT_MADD(MTVM_ACT_MADD(MTVM_ACT_MADD(MTVM_ACT_MADD(p4, x2, p3), x2,
                                                              p2), x2, p1), x2, p0);
    const float q = MTVM_ACT_MADD(MTVM_ACT_MADD(MTVM_ACT_MADD(MTVM_ACT_MADD(q4, x2, q3), x2,
                                                              q2), x2, q1), x2, q0);
    return x * p / q;
}

/* tanh(x) as the rational function x P(x^2) / Q(x^2) (degrees 9 and 8), fitted by
 * mtvm (weighted least squares, Loeb iteration) on [0, 9]: relative error below
 * 4e-7 in float arithmetic everywhere, against the about 150 instructions of a
 * libm tanhf on a Cortex-M4F. Beyond +-8 the result is +-1 exactly (the gates of a
 * recurrent net saturate there, and 1 - z must then be 0: 1 - tanh(8) = 2.3e-7); within,
 * the function itself stays in [-1, 1]: every float of [0, 8] was evaluated, with the
 * fused multiply-adds and without, and none gives more than 1 (from 8.0753 on some do;
 * tests/kernels/test_dense_kernels.py evaluates every float of [6, 8.5] on the host and
 * the boards). So the bounds are one select of the result, where a clamp of the input and
 * one of the result took twice the comparisons (VCMP, VMRS, IT, VMOV each on the
 * Cortex-M4F, where a 16-unit LSTM spent half its time in these functions). Large |x|
 * overflows P and Q, which the select discards; NaN propagates. */
#define MTVM_TANH_F32_COEFFS(F) \
    F(1.37056677e-08f, 2.08651527e-05f, 3.51127703e-03f, 1.33942828e-01f, 1.0f, \
      7.92102014e-07f, 3.31120042e-04f, 2.59368103e-02f, 4.67276037e-01f, 1.0f)
/* The coefficients as arguments (p4, ..., p0, q4, ..., q0): MTVM_..._COEFFS(MTVM_ACT_ARGS);
 * the array forms (arm_dsp/mtvm_activation_f32_vfp.h) lay the same out as a table. */
#define MTVM_ACT_ARGS(...) __VA_ARGS__

static inline float mtvm_tanh_f32(float x)
{
    const float t = mtvm_act_rational(x, MTVM_TANH_F32_COEFFS(MTVM_ACT_ARGS));
    /* a NaN x fails both comparisons: NaN out */
    return x > 8.0f ? 1.0f : (x < -8.0f ? -1.0f : t);
}

/* 1 / (1 + e^-x) = (1 + tanh(x / 2)) / 2 = 1/2 + x P(x^2 / 4) / (4 Q(x^2 / 4)), the same
 * function with P's coefficients divided by 4^(k + 1) and Q's by 4^k: powers of two, so
 * every intermediate is the tanh's scaled exactly and the result is bit for bit
 * 0.5f + 0.5f * mtvm_tanh_f32(0.5f * x), in [0, 1] (1 and 0 exactly beyond +-16), with two
 * multiplies fewer. Absolute error below 2e-7. */
#define MTVM_SIGMOID_F32_COEFFS(F) \
    F(1.3384441e-11f, 8.15045e-08f, 5.4863704e-05f, 8.371427e-03f, 0.25f, \
      3.0941485e-09f, 5.1737507e-06f, 1.6210506e-03f, 1.1681901e-01f, 1.0f)

static inline float mtvm_sigmoid_f32(float x)
{
    const float s = 0.5f + mtvm_act_rational(x, MTVM_SIGMOID_F32_COEFFS(MTVM_ACT_ARGS));
    return x > 16.0f ? 1.0f : (x < -16.0f ? 0.0f : s);
}

#endif  /* MTVM_ACTIVATION_F32_H_ */
