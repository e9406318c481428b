/* mtvm_platform.h: the porting surface of the mtvm C runtime.
 *
 * A board implements these hooks (c_runtime/template/mtvm_platform_template.c
 * is a copyable skeleton; project_templates/host/src/platform_posix.c is the
 * POSIX one). Nothing else in c_runtime/ touches hardware or libc I/O.
 *
 * Units are in the names: *_ticks are timer ticks, *_ticks_per_second their
 * rate. The timer is single-shot and NOT re-entrant: start, then stop returns
 * the ticks elapsed since the last start. Models compiled with profiling call
 * start/stop around every kernel themselves (see docs/runtime.md, "Timing").
 */
#ifndef MTVM_PLATFORM_H_
#define MTVM_PLATFORM_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bring up clocks, the byte transport (UART/stdio) and the timer. Called once
 * by main before anything else. */
void mtvm_platform_init(void);

/* Send size_bytes bytes to the host; blocks until the transport accepted
 * all of them. Used for every reply and log packet. */
void mtvm_platform_write(const uint8_t* data, size_t size_bytes);

/* Unrecoverable error: report `code` if the board can, then stop (halt,
 * reset or exit). Must not return. */
void mtvm_platform_abort(int32_t code);

/* Start (restart) the timer. */
void mtvm_platform_timer_start(void);

/* Ticks elapsed since the last mtvm_platform_timer_start(). */
uint64_t mtvm_platform_timer_stop_ticks(void);

/* The timer's rate. */
uint64_t mtvm_platform_ticks_per_second(void);

/* Optional debug channel independent of the host link (semihosting, a second
 * UART, stderr). Only called when the runtime is built with
 * -DMTVM_USE_PLATFORM_LOG; otherwise a port need not define it. */
void mtvm_platform_log(const char* message);

#ifdef __cplusplus
}
#endif
#endif /* MTVM_PLATFORM_H_ */
