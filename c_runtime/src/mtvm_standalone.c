/* The untethered app's core and libc-free text formatting (mtvm_standalone.h). */
#include "mtvm_standalone.h"

#include <string.h>

#include "mtvm_platform.h"
#include "mtvm_protocol.h"

/* room(pos, cap): a character and the terminator still fit after pos. Written
 * so that no pos wraps around (`pos + 1 < cap` does at UINT32_MAX, and gcc -O3
 * warns of the write it would allow). */
static int room(uint32_t pos, uint32_t cap)
{
    return pos < cap && cap - pos > 1u;
}

uint32_t mtvm_fmt_str(char* buf, uint32_t pos, uint32_t cap, const char* s)
{
    while (s && *s && room(pos, cap)) {
        buf[pos++] = *s++;
    }
    if (pos < cap) {
        buf[pos] = '\0';
    }
    return pos;
}

uint32_t mtvm_fmt_u64(char* buf, uint32_t pos, uint32_t cap, uint64_t v)
{
    char tmp[21];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + (int)(v % 10u));
        v /= 10u;
    } while (v);
    while (n > 0 && room(pos, cap)) {
        buf[pos++] = tmp[--n];
    }
    if (pos < cap) {
        buf[pos] = '\0';
    }
    return pos;
}

uint32_t mtvm_fmt_i64(char* buf, uint32_t pos, uint32_t cap, int64_t v)
{
    if (v < 0) {
        pos = mtvm_fmt_str(buf, pos, cap, "-");
        return mtvm_fmt_u64(buf, pos, cap, (uint64_t)(-(v + 1)) + 1u);
    }
    return mtvm_fmt_u64(buf, pos, cap, (uint64_t)v);
}

/* Scientific notation with 9 significant digits (enough to round-trip a
 * float32): -1.23456789e-05. Plain double arithmetic, no libm. */
uint32_t mtvm_fmt_f64(char* buf, uint32_t pos, uint32_t cap, double v)
{
    int exp10 = 0, i;
    uint64_t digits;
    char d[10];
    if (v != v) {
        return mtvm_fmt_str(buf, pos, cap, "nan");
    }
    if (v < 0) {
        pos = mtvm_fmt_str(buf, pos, cap, "-");
        v = -v;
    }
    if (v > 1.7976931348623157e308) {
        return mtvm_fmt_str(buf, pos, cap, "inf");
    }
    if (v == 0.0) {
        return mtvm_fmt_str(buf, pos, cap, "0");
    }
    while (v >= 1e9) { v /= 10.0; ++exp10; }
    while (v < 1e8) { v *= 10.0; --exp10; }
    digits = (uint64_t)(v + 0.5);
    if (digits >= 1000000000u) {
        digits /= 10u;
        ++exp10;
    }
    exp10 += 8;
    for (i = 8; i >= 0; --i) {
        d[i] = (char)('0' + (int)(digits % 10u));
        digits /= 10u;
    }
    d[9] = '\0';
    if (room(pos, cap)) {
        buf[pos++] = d[0];
    }
    pos = mtvm_fmt_str(buf, pos, cap, ".");
    pos = mtvm_fmt_str(buf, pos, cap, d + 1);
    pos = mtvm_fmt_str(buf, pos, cap, exp10 < 0 ? "e-" : "e+");
    if (exp10 < 0) {
        exp10 = -exp10;
    }
    if (exp10 < 10) {
        pos = mtvm_fmt_str(buf, pos, cap, "0");
    }
    return mtvm_fmt_u64(buf, pos, cap, (uint64_t)exp10);
}

void mtvm_print(const char* s)
{
    size_t n = 0;
    while (s[n]) {
        ++n;
    }
    mtvm_platform_write((const uint8_t*)s, n);
}

static const char* dtype_name(uint8_t dtype)
{
    switch (dtype) {
    case MTVM_DTYPE_FLOAT32: return "float32";
    case MTVM_DTYPE_INT8: return "int8";
    case MTVM_DTYPE_UINT8: return "uint8";
    case MTVM_DTYPE_INT16: return "int16";
    case MTVM_DTYPE_UINT16: return "uint16";
    case MTVM_DTYPE_INT32: return "int32";
    case MTVM_DTYPE_UINT32: return "uint32";
    case MTVM_DTYPE_INT64: return "int64";
    case MTVM_DTYPE_UINT64: return "uint64";
    case MTVM_DTYPE_BOOL: return "bool";
    case MTVM_DTYPE_FLOAT64: return "float64";
    case MTVM_DTYPE_FLOAT16: return "float16";
    default: return "unknown";
    }
}

static uint32_t fmt_value(char* b, uint32_t pos, uint32_t cap, const mtvm_tensor_t* t,
                          uint32_t i)
{
    const uint8_t* p = (const uint8_t*)t->data;
    switch (t->dtype) {
    case MTVM_DTYPE_FLOAT32: { float v; memcpy(&v, p + 4 * i, 4);
        return mtvm_fmt_f64(b, pos, cap, (double)v); }
    case MTVM_DTYPE_FLOAT64: { double v; memcpy(&v, p + 8 * i, 8);
        return mtvm_fmt_f64(b, pos, cap, v); }
    case MTVM_DTYPE_INT8: return mtvm_fmt_i64(b, pos, cap, (int8_t)p[i]);
    case MTVM_DTYPE_UINT8: case MTVM_DTYPE_BOOL: return mtvm_fmt_u64(b, pos, cap, p[i]);
    case MTVM_DTYPE_INT16: { int16_t v; memcpy(&v, p + 2 * i, 2);
        return mtvm_fmt_i64(b, pos, cap, v); }
    case MTVM_DTYPE_UINT16: { uint16_t v; memcpy(&v, p + 2 * i, 2);
        return mtvm_fmt_u64(b, pos, cap, v); }
    case MTVM_DTYPE_INT32: { int32_t v; memcpy(&v, p + 4 * i, 4);
        return mtvm_fmt_i64(b, pos, cap, v); }
    case MTVM_DTYPE_UINT32: { uint32_t v; memcpy(&v, p + 4 * i, 4);
        return mtvm_fmt_u64(b, pos, cap, v); }
    case MTVM_DTYPE_INT64: { int64_t v; memcpy(&v, p + 8 * i, 8);
        return mtvm_fmt_i64(b, pos, cap, v); }
    case MTVM_DTYPE_UINT64: { uint64_t v; memcpy(&v, p + 8 * i, 8);
        return mtvm_fmt_u64(b, pos, cap, v); }
    default: return mtvm_fmt_str(b, pos, cap, "?");
    }
}

/* Names come from the model: print them with every byte outside printable ASCII as '?', so a
 * name holding a newline or a control sequence cannot forge lines of this app's output. */
static void print_name(const char* name)
{
    char chunk[33];
    uint32_t n = 0;
    for (; *name != '\0'; ++name) {
        unsigned char c = (unsigned char)*name;
        chunk[n++] = (c >= 0x20u && c < 0x7fu) ? (char)c : '?';
        if (n == sizeof(chunk) - 1) {
            chunk[n] = '\0';
            mtvm_print(chunk);
            n = 0;
        }
    }
    chunk[n] = '\0';
    mtvm_print(chunk);
}

static void print_output(uint32_t index, const mtvm_tensor_t* t)
{
    char line[96];
    uint32_t pos, i, n, esize = mtvm_dtype_size(t->dtype);
    pos = mtvm_fmt_str(line, 0, sizeof(line), "output ");
    pos = mtvm_fmt_u64(line, pos, sizeof(line), index);
    pos = mtvm_fmt_str(line, pos, sizeof(line), " ");
    mtvm_print(line);
    print_name(t->name);
    pos = mtvm_fmt_str(line, 0, sizeof(line), " ");
    pos = mtvm_fmt_str(line, pos, sizeof(line), dtype_name(t->dtype));
    pos = mtvm_fmt_str(line, pos, sizeof(line), "[");
    for (i = 0; i < t->ndim; ++i) {
        pos = mtvm_fmt_i64(line, pos, sizeof(line), t->shape[i]);
        if (i + 1 < t->ndim) {
            pos = mtvm_fmt_str(line, pos, sizeof(line), ",");
        }
    }
    mtvm_fmt_str(line, pos, sizeof(line), "]:");
    mtvm_print(line);
    n = esize ? t->size_bytes / esize : 0;
    for (i = 0; i < n; ++i) {
        pos = mtvm_fmt_str(line, 0, sizeof(line), " ");
        fmt_value(line, pos, sizeof(line), t, i);
        mtvm_print(line);
    }
    mtvm_print("\n");
}

int32_t mtvm_standalone_run(const mtvm_model_t* m, const mtvm_sample_t* sample, uint32_t runs)
{
    char line[128];
    uint32_t pos, i;
    uint64_t ticks = 0, t, tps, us;
    int32_t status = 0;
    if (mtvm_model_check(m) != MTVM_STATUS_OK || sample->num_inputs != m->num_inputs) {
        mtvm_platform_abort(MTVM_STATUS_BAD_MODEL_DESCRIPTOR);
    }
    if (runs == 0) {
        runs = 1;
    }
    mtvm_print("mtvm standalone: model ");
    print_name(m->name);
    pos = mtvm_fmt_str(line, 0, sizeof(line), ", ");
    pos = mtvm_fmt_u64(line, pos, sizeof(line), runs);
    mtvm_fmt_str(line, pos, sizeof(line), " run(s)\n");
    mtvm_print(line);
    for (i = 0; i < m->num_inputs; ++i) {
        memcpy(m->inputs[i].data, sample->inputs[i], m->inputs[i].size_bytes);
    }
    for (i = 0; i < runs && status == 0; ++i) {
        status = mtvm_model_run_timed(m, &t);
        ticks += t;
    }
    if (status == 0) {
        for (i = 0; i < m->num_outputs; ++i) {
            print_output(i, &m->outputs[i]);
        }
        tps = mtvm_platform_ticks_per_second();
        t = ticks / runs;
        us = tps ? (t / tps) * 1000000u + ((t % tps) * 1000000u) / tps : 0;
        pos = mtvm_fmt_str(line, 0, sizeof(line), "time per inference: ");
        pos = mtvm_fmt_u64(line, pos, sizeof(line), us);
        pos = mtvm_fmt_str(line, pos, sizeof(line), " us (");
        pos = mtvm_fmt_u64(line, pos, sizeof(line), t);
        pos = mtvm_fmt_str(line, pos, sizeof(line), " ticks at ");
        pos = mtvm_fmt_u64(line, pos, sizeof(line), tps);
        mtvm_fmt_str(line, pos, sizeof(line), " Hz)\n");
        mtvm_print(line);
    }
    pos = mtvm_fmt_str(line, 0, sizeof(line), "mtvm standalone: done (status ");
    pos = mtvm_fmt_i64(line, pos, sizeof(line), status);
    mtvm_fmt_str(line, pos, sizeof(line), ")\n");
    mtvm_print(line);
    return status;
}
