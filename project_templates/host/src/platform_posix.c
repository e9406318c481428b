/* mtvm_platform.h for POSIX hosts: stdout is the link to the host, stderr the
 * debug log, CLOCK_MONOTONIC the timer (nanosecond ticks). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mtvm_platform.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void write_all(int fd, const uint8_t* data, size_t size)
{
    while (size) {
        ssize_t n = write(fd, data, size);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            _exit(0);   /* the host went away */
        }
        data += n;
        size -= (size_t)n;
    }
}

void mtvm_platform_init(void) {}

void mtvm_platform_write(const uint8_t* data, size_t size_bytes)
{
    write_all(1, data, size_bytes);
}

void mtvm_platform_log(const char* message)
{
    write_all(2, (const uint8_t*)message, strlen(message));
    write_all(2, (const uint8_t*)"\n", 1);
}

void mtvm_platform_abort(int32_t code)
{
    static const char msg[] = "mtvm: platform abort\n";
    write_all(2, (const uint8_t*)msg, sizeof(msg) - 1);
    _exit(100 + (int)(code & 0x1f));
}

static uint64_t timer_t0;

void mtvm_platform_timer_start(void)
{
    timer_t0 = now_ns();
}

uint64_t mtvm_platform_timer_stop_ticks(void)
{
    return now_ns() - timer_t0;
}

uint64_t mtvm_platform_ticks_per_second(void)
{
    return 1000000000u;
}

/* Differs between runs: the host also assigns its own nonce on connect. */
uint32_t mtvm_posix_boot_nonce(void)
{
    uint64_t t = now_ns();
    return (uint32_t)(t ^ (t >> 32) ^ ((uint64_t)getpid() << 16)) | 1u;
}
