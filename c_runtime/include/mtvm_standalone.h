/* mtvm_standalone.h: the untethered app's core, shared by every template.
 *
 * Copies the embedded sample into the model's inputs, runs the model, prints
 * every output and the time per inference through mtvm_platform_write (no
 * stdio needed), in this format:
 *
 *   mtvm standalone: model <name>, <n> run(s)
 *   output 0 <name> float32[1,12]: v0 v1 ...      (9 significant digits)
 *   time per inference: <us> us (<ticks> ticks at <rate> Hz)
 *   mtvm standalone: done (status 0)
 */
#ifndef MTVM_STANDALONE_H_
#define MTVM_STANDALONE_H_

#include <stdint.h>

#include "mtvm_model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mtvm_sample {
    uint16_t num_inputs;
    const void* const* inputs;   /* num_inputs buffers of inputs[i].size_bytes */
} mtvm_sample_t;

/* Returns 0, or the model's nonzero status. runs >= 1 (timed). */
int32_t mtvm_standalone_run(const mtvm_model_t* model, const mtvm_sample_t* sample,
                            uint32_t runs);

/* Text helpers (no libc): append to buf, return the new length. */
uint32_t mtvm_fmt_str(char* buf, uint32_t pos, uint32_t cap, const char* s);
uint32_t mtvm_fmt_u64(char* buf, uint32_t pos, uint32_t cap, uint64_t v);
uint32_t mtvm_fmt_i64(char* buf, uint32_t pos, uint32_t cap, int64_t v);
uint32_t mtvm_fmt_f64(char* buf, uint32_t pos, uint32_t cap, double v);

/* Writes a NUL-terminated string through mtvm_platform_write. */
void mtvm_print(const char* s);

#ifdef __cplusplus
}
#endif
#endif /* MTVM_STANDALONE_H_ */
