/* mtvm_model.h: how the runtime learns the model it serves.
 *
 * The project generator writes one `const mtvm_model_t` (default symbol
 * `mtvm_model`) as C from the model's metadata.json: tensors with their
 * statically allocated buffers, a run function binding those buffers to
 * tvmgen_<mod>_run, and (profiling builds) the per-kernel tick array. See
 * docs/runtime.md, "The model descriptor".
 */
#ifndef MTVM_MODEL_H_
#define MTVM_MODEL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MTVM_MAX_DIMS 8

typedef struct mtvm_tensor {
    const char* name;          /* ONNX tensor name */
    uint8_t dtype;             /* MTVM_DTYPE_* (mtvm_protocol.h) */
    uint8_t ndim;              /* <= MTVM_MAX_DIMS */
    const int32_t* shape;      /* ndim dims */
    uint32_t size_bytes;       /* product(shape) * element size */
    void* data;                /* buffer of size_bytes bytes (16-byte aligned) */
} mtvm_tensor_t;

typedef struct mtvm_model {
    const char* name;          /* model name (the ONNX file's stem) */
    const char* module_name;   /* tvmgen_<module_name>_run */
    uint16_t num_inputs;
    uint16_t num_outputs;
    const mtvm_tensor_t* inputs;
    const mtvm_tensor_t* outputs;
    uint32_t workspace_bytes;  /* the model's static arena */
    /* Runs the model once on inputs[i].data -> outputs[i].data; 0 = success. */
    int32_t (*run)(void);
    /* Kernels (fused operators), in execution order. */
    uint16_t num_kernels;
    const char* const* kernel_names;   /* num_kernels names, or NULL */
    const uint64_t* kernel_macs;       /* num_kernels MAC counts, or NULL */
    /* Profiling builds: ticks of each kernel in the last run; NULL otherwise. */
    const uint64_t* profile_ticks;
} mtvm_model_t;

/* Bytes per element of an MTVM_DTYPE_* code, 0 if unknown. */
uint32_t mtvm_dtype_size(uint8_t dtype);

/* 0 if the descriptor is self-consistent, else MTVM_STATUS_BAD_MODEL_DESCRIPTOR. */
uint16_t mtvm_model_check(const mtvm_model_t* model);

/* Runs the model once; *ticks gets its duration. In profiling builds the
 * model drives the timer itself, so the duration is the sum of its kernels'
 * ticks (inter-kernel glue is not counted). Returns the model's status. */
int32_t mtvm_model_run_timed(const mtvm_model_t* model, uint64_t* ticks);

#ifdef __cplusplus
}
#endif
#endif /* MTVM_MODEL_H_ */
