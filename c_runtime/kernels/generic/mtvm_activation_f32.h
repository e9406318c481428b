/* mtvm_activation_f32.h: tanh and the logistic sigmoid in float without libm, for the
 * gates of the recurrent kernels (evaluated GH times per time step).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_ACTIVATION_F32_H_
#define MTVM_ACTIVATION_F32_H_

/* tanh(x) as the rational function x P(x^2) / Q(x^2) (degrees 9 and 8), fitted by
 * mtvm (weighted least squares, Loeb iteration) on [0, 9]: relative error below
 * 4e-7 in float arithmetic everywhere, against the about 150 instructions of a
 * libm tanhf on a Cortex-M4F. |x| >= 9 gives +-1 (tanh(9) rounds to 1 in float);
 * the clamp also keeps the result in [-1, 1]. NaN propagates. */
static inline float mtvm_tanh_f32(float x)
{
    const float c = x > 9.0f ? 9.0f : (x < -9.0f ? -9.0f : x);
    const float x2 = c * c;
    float p = 1.37056677e-08f;
    p = p * x2 + 2.08651527e-05f;
    p = p * x2 + 3.51127703e-03f;
    p = p * x2 + 1.33942828e-01f;
    p = p * x2 + 1.0f;
    float q = 7.92102014e-07f;
    q = q * x2 + 3.31120042e-04f;
    q = q * x2 + 2.59368103e-02f;
    q = q * x2 + 4.67276037e-01f;
    q = q * x2 + 1.0f;
    const float t = c * p / q;
    /* a NaN x passes both clamps (every comparison with it is false): NaN out */
    return t > 1.0f ? 1.0f : (t < -1.0f ? -1.0f : t);
}

/* 1 / (1 + e^-x) = (1 + tanh(x / 2)) / 2: absolute error below 2e-7. */
static inline float mtvm_sigmoid_f32(float x)
{
    return 0.5f + 0.5f * mtvm_tanh_f32(0.5f * x);
}

#endif  /* MTVM_ACTIVATION_F32_H_ */
