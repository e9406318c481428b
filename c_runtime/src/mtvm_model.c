/* Model descriptor helpers (see mtvm_model.h). */
#include "mtvm_model.h"

#include "mtvm_platform.h"
#include "mtvm_protocol.h"

uint32_t mtvm_dtype_size(uint8_t dtype)
{
    switch (dtype) {
    case MTVM_DTYPE_INT8: case MTVM_DTYPE_UINT8: case MTVM_DTYPE_BOOL: return 1;
    case MTVM_DTYPE_INT16: case MTVM_DTYPE_UINT16: case MTVM_DTYPE_FLOAT16: return 2;
    case MTVM_DTYPE_FLOAT32: case MTVM_DTYPE_INT32: case MTVM_DTYPE_UINT32: return 4;
    case MTVM_DTYPE_INT64: case MTVM_DTYPE_UINT64: case MTVM_DTYPE_FLOAT64: return 8;
    default: return 0;
    }
}

static int tensor_ok(const mtvm_tensor_t* t)
{
    uint32_t i, n = 1;
    if (!t->name || t->ndim > MTVM_MAX_DIMS || (t->ndim && !t->shape)) {
        return 0;
    }
    for (i = 0; i < t->ndim; ++i) {
        if (t->shape[i] < 0) {
            return 0;
        }
        n *= (uint32_t)t->shape[i];
    }
    return mtvm_dtype_size(t->dtype) * n == t->size_bytes && (t->data || !t->size_bytes);
}

uint16_t mtvm_model_check(const mtvm_model_t* m)
{
    uint16_t i;
    if (!m || !m->name || !m->run || (m->num_inputs && !m->inputs)
        || (m->num_outputs && !m->outputs)) {
        return MTVM_STATUS_BAD_MODEL_DESCRIPTOR;
    }
    for (i = 0; i < m->num_inputs; ++i) {
        if (!tensor_ok(&m->inputs[i])) {
            return MTVM_STATUS_BAD_MODEL_DESCRIPTOR;
        }
    }
    for (i = 0; i < m->num_outputs; ++i) {
        if (!tensor_ok(&m->outputs[i])) {
            return MTVM_STATUS_BAD_MODEL_DESCRIPTOR;
        }
    }
    return MTVM_STATUS_OK;
}

int32_t mtvm_model_run_timed(const mtvm_model_t* m, uint64_t* ticks)
{
    int32_t status;
    if (m->profile_ticks) {
        /* The model times each kernel itself (nested use of the one timer):
         * the run's duration is the sum of its kernels. */
        uint16_t k;
        uint64_t sum = 0;
        status = m->run();
        for (k = 0; k < m->num_kernels; ++k) {
            sum += m->profile_ticks[k];
        }
        *ticks = sum;
        return status;
    }
    mtvm_platform_timer_start();
    status = m->run();
    *ticks = mtvm_platform_timer_stop_ticks();
    return status;
}
