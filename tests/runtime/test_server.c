/* In-process C test of the RPC server: requests are framed by the test,
 * replies captured from mtvm_platform_write and decoded with the unframer.
 * Checks exactly-once replay, BUSY, oversized packets, bad CRC, errors and
 * profiling-build timing. Built with ASan/UBSan by test_c_runtime.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mtvm_server.h"

/* -- platform ------------------------------------------------------------------ */
static uint8_t out[1 << 16];
static size_t out_n;
static uint64_t fake_clock;
static int aborted;

void mtvm_platform_init(void) {}
void mtvm_platform_write(const uint8_t* d, size_t n)
{
    if (out_n + n > sizeof(out)) { fprintf(stderr, "overflow\n"); exit(2); }
    memcpy(out + out_n, d, n);
    out_n += n;
}
void mtvm_platform_abort(int32_t code) { aborted = code; }
static uint64_t t0;
void mtvm_platform_timer_start(void) { t0 = fake_clock; }
uint64_t mtvm_platform_timer_stop_ticks(void) { return fake_clock - t0; }
uint64_t mtvm_platform_ticks_per_second(void) { return 1000; }
void mtvm_platform_log(const char* m) { (void)m; }

/* -- a fake model: y = 2 * x (4 floats), counting runs; 2 "kernels" -------- */
static float x[4], y[4];
static int runs;
static uint64_t prof[2];
static const int32_t shape[2] = {1, 4};
static const mtvm_tensor_t ins[1] = {{"x", MTVM_DTYPE_FLOAT32, 2, shape, 16, x}};
static const mtvm_tensor_t outs[1] = {{"y", MTVM_DTYPE_FLOAT32, 2, shape, 16, y}};
static int32_t run(void)
{
    int i;
    for (i = 0; i < 4; ++i) y[i] = 2 * x[i];
    ++runs;
    fake_clock += 7;
    prof[0] = 3;
    prof[1] = 4;
    return 0;
}
static const char* const names[2] = {"k0", "k1"};
static const uint64_t macs[2] = {10, 20};
static mtvm_model_t model = {"fake", "default", 1, 1, ins, outs, 64, run, 2, names, macs, 0};

/* -- cancel polling: bytes handed to the server during a TIME ------------------ */
static uint8_t pending[256];
static size_t pending_n, pending_pos;
static int polls;
static size_t poll_bytes(uint8_t* buf, size_t max)
{
    size_t n = pending_n - pending_pos;
    ++polls;
    if (n > max) n = max;
    memcpy(buf, pending + pending_pos, n);
    pending_pos += n;
    return n;
}

/* CRC-32 (zlib), bit by bit: the reference for the server's table version. */
static uint32_t crc32_ref(const uint8_t* p, size_t n, uint32_t crc)
{
    size_t i;
    int k;
    crc = ~crc;
    for (i = 0; i < n; ++i) {
        crc ^= p[i];
        for (k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

/* -- helpers --------------------------------------------------------------------- */
static int failures, checks;
#define CHECK(c) do { ++checks; if (!(c)) { ++failures; \
    fprintf(stderr, "FAIL line %d: %s\n", __LINE__, #c); } } while (0)

static mtvm_server_t srv;

typedef struct { uint8_t type; uint16_t seq; uint32_t nonce; uint16_t status;
                 uint8_t body[4096]; uint32_t body_n; } reply_t;

static int decode(reply_t* r, int max)
{
    static uint8_t buf[8192];
    mtvm_unframer_t u;
    size_t i;
    int n = 0;
    mtvm_unframer_init(&u, buf, sizeof(buf));
    for (i = 0; i < out_n && n < max; ++i) {
        if (mtvm_unframer_push(&u, out[i]) == MTVM_UNFRAME_PACKET && u.length >= 10) {
            r[n].type = buf[0];
            r[n].seq = (uint16_t)(buf[2] | buf[3] << 8);
            memcpy(&r[n].nonce, buf + 4, 4);
            r[n].status = (uint16_t)(buf[8] | buf[9] << 8);
            r[n].body_n = u.length - 10;
            memcpy(r[n].body, buf + 10, r[n].body_n);
            ++n;
        }
    }
    out_n = 0;
    return n;
}

/* Frames a request into wire (via the server's own framer, captured). */
static size_t frame(uint8_t* wire, uint8_t type, uint16_t seq, const void* body, size_t n)
{
    uint8_t head[4];
    size_t len;
    head[0] = type; head[1] = MTVM_PROTOCOL_VERSION; head[2] = (uint8_t)seq;
    head[3] = (uint8_t)(seq >> 8);
    out_n = 0;
    mtvm_frame_write(head, 4, (const uint8_t*)body, n);
    len = out_n;
    memcpy(wire, out, len);
    out_n = 0;
    return len;
}

static int request(reply_t* r, int max, uint8_t type, uint16_t seq, const void* body, size_t n)
{
    static uint8_t wire[16384];
    size_t len = frame(wire, type, seq, body, n);
    mtvm_server_feed(&srv, wire, len);
    return decode(r, max);
}

int main(void)
{
    static reply_t r[8];
    static uint8_t big[MTVM_MAX_PACKET_BYTES + 100], wire[2 * sizeof(big) + 64];
    uint8_t body[16];
    float in[4] = {1, 2, 3, -4};
    uint64_t ticks;
    int n;
    size_t len;

    mtvm_server_init(&srv, &model, "test-board", 0x1234u);
    n = decode(r, 8);
    CHECK(n == 1 && r[0].type == MTVM_MSG_LOG && r[0].nonce == 0x1234u);

    /* INFO adopts the host's nonce */
    memcpy(body, "\0\0\x78\x56\x34\x12", 6);
    n = request(r, 8, MTVM_MSG_INFO, 1, body, 6);
    CHECK(n == 1 && r[0].type == (MTVM_MSG_INFO | 0x80) && r[0].seq == 1);
    CHECK(r[0].nonce == 0x12345678u && r[0].status == MTVM_STATUS_OK);

    /* CRC-32 of "123456789" is the standard check value */
    CHECK(crc32_ref((const uint8_t*)"123456789", 9, 0) == 0xCBF43926u);

    /* WRITE_INPUT carries a CRC-32 of index|offset|data: a bad one is refused
     * (nothing stored), a good one stored. */
    memcpy(body, "\0\0\0\0\0\0", 6);
    {
        uint8_t b[10 + 16];
        uint32_t crc;
        memcpy(b, body, 6);
        memcpy(b + 10, in, 16);
        crc = crc32_ref(b, 6, 0);
        crc = crc32_ref(b + 10, 16, crc);
        memcpy(b + 6, &crc, 4);
        b[12] ^= 0x40;                                  /* a data bit flipped */
        n = request(r, 8, MTVM_MSG_WRITE_INPUT, 99, b, sizeof(b));
        CHECK(n == 1 && r[0].status == MTVM_STATUS_BAD_DATA_CRC && x[0] == 0.0f);
        b[12] ^= 0x40;
        b[2] ^= 4;                                      /* the offset corrupted */
        n = request(r, 8, MTVM_MSG_WRITE_INPUT, 98, b, sizeof(b));
        CHECK(n == 1 && r[0].status == MTVM_STATUS_BAD_DATA_CRC && x[1] == 0.0f);
        b[2] ^= 4;
        n = request(r, 8, MTVM_MSG_WRITE_INPUT, 2, b, sizeof(b));
        CHECK(n == 1 && r[0].status == MTVM_STATUS_OK && x[3] == -4.0f);
    }
    /* WRITE_INPUT, RUN: BUSY then the reply; a retry is replayed, not re-run */
    n = request(r, 8, MTVM_MSG_RUN, 3, NULL, 0);
    CHECK(n == 2 && r[0].type == MTVM_MSG_BUSY && r[0].seq == 3);
    CHECK(r[1].type == (MTVM_MSG_RUN | 0x80) && r[1].status == MTVM_STATUS_OK && runs == 1);
    memcpy(&ticks, r[1].body, 8);
    CHECK(ticks == 7 && y[3] == -8.0f);
    n = request(r, 8, MTVM_MSG_RUN, 3, NULL, 0);
    CHECK(n == 1 && r[0].type == (MTVM_MSG_RUN | 0x80) && runs == 1 && srv.replays == 1);
    n = request(r, 8, MTVM_MSG_RUN, 4, NULL, 0);
    CHECK(n == 2 && runs == 2);

    /* READ_OUTPUT */
    {
        uint8_t b[10] = {0, 0, 8, 0, 0, 0, 8, 0, 0, 0};
        float v[2];
        uint32_t crc;
        uint8_t head[6] = {0, 0, 8, 0, 0, 0};
        n = request(r, 8, MTVM_MSG_READ_OUTPUT, 5, b, 10);
        memcpy(v, r[0].body + 4, 8);
        memcpy(&crc, r[0].body, 4);
        CHECK(n == 1 && r[0].body_n == 4 + 8 && v[0] == 6.0f && v[1] == -8.0f);
        CHECK(crc == crc32_ref(r[0].body + 4, 8, crc32_ref(head, 6, 0)));
        b[2] = 12;
        n = request(r, 8, MTVM_MSG_READ_OUTPUT, 6, b, 10);
        CHECK(n == 1 && r[0].status == MTVM_STATUS_OUT_OF_RANGE && r[0].body_n == 0);
        b[0] = 1;
        n = request(r, 8, MTVM_MSG_READ_OUTPUT, 7, b, 10);
        CHECK(n == 1 && r[0].status == MTVM_STATUS_BAD_INDEX);
    }

    /* TIME without profiling: one timer window around all runs */
    memcpy(body, "\x05\0\0\0", 4);
    n = request(r, 8, MTVM_MSG_TIME, 8, body, 4);
    memcpy(&ticks, r[1].body + 4, 8);
    CHECK(n == 2 && r[1].status == MTVM_STATUS_OK && ticks == 35 && runs == 7);
    n = request(r, 8, MTVM_MSG_PROFILE, 9, "\x01\0\0", 3);
    CHECK(n == 1 && r[0].status == MTVM_STATUS_NOT_SUPPORTED);   /* not a profiling build */

    /* profiling build: TIME sums the kernels' ticks (the model drives the timer) */
    model.profile_ticks = prof;
    n = request(r, 8, MTVM_MSG_TIME, 10, body, 4);
    memcpy(&ticks, r[1].body + 4, 8);
    CHECK(n == 2 && ticks == 5 * 7);
    n = request(r, 8, MTVM_MSG_PROFILE, 11, "\x01\0\0", 3);
    CHECK(n == 2 && r[0].type == MTVM_MSG_BUSY && r[1].status == MTVM_STATUS_OK);
    CHECK(r[1].body_n == 6 + 16 && r[1].body[0] == 2 && r[1].body[4] == 2);
    n = request(r, 8, MTVM_MSG_PROFILE, 12, "\0\x01\0", 3);     /* page from kernel 1 */
    CHECK(n == 1 && r[0].body[2] == 1 && r[0].body[4] == 1 && r[0].body[6] == 4);

    /* CANCEL: idle, answered at once; during a TIME (polled between runs), the
     * TIME stops early with CANCELLED and the number of runs done, then the
     * CANCEL is answered; other packets read meanwhile are dropped. */
    n = request(r, 8, MTVM_MSG_CANCEL, 30, NULL, 0);
    CHECK(n == 1 && r[0].type == (MTVM_MSG_CANCEL | 0x80) && r[0].status == MTVM_STATUS_OK);
    model.profile_ticks = NULL;
    mtvm_server_set_poll(&srv, poll_bytes);
    pending_n = frame(pending, MTVM_MSG_ECHO, 31, "x", 1);
    pending_n += frame(pending + pending_n, MTVM_MSG_CANCEL, 32, NULL, 0);
    pending_pos = 0;
    memcpy(body, "\xff\xff\xff\x7f", 4);            /* 2^31 - 1 runs */
    runs = 0;
    n = request(r, 8, MTVM_MSG_TIME, 33, body, 4);
    CHECK(n == 3 && r[0].type == MTVM_MSG_BUSY && r[1].type == (MTVM_MSG_TIME | 0x80)
          && r[1].status == MTVM_STATUS_CANCELLED && r[2].type == (MTVM_MSG_CANCEL | 0x80)
          && r[2].seq == 32 && r[2].status == MTVM_STATUS_OK);
    CHECK(runs > 0 && runs < 100 && srv.dropped_while_busy == 1);
    CHECK((int)(r[1].body[0] | r[1].body[1] << 8) == runs);
    n = request(r, 8, MTVM_MSG_CANCEL, 32, NULL, 0);       /* its retry: replayed */
    CHECK(n == 1 && r[0].seq == 32 && r[0].status == MTVM_STATUS_OK);
    pending_n = pending_pos = 0;
    memcpy(body, "\x03\0\0\0", 4);
    n = request(r, 8, MTVM_MSG_TIME, 34, body, 4);     /* nothing pending: runs to the end */
    CHECK(n == 2 && r[1].status == MTVM_STATUS_OK && r[1].body[0] == 3 && polls > 0);
    model.profile_ticks = prof;

    /* INFO items: tensor, kernel, out of range */
    n = request(r, 8, MTVM_MSG_INFO, 13, "\x02\0", 2);
    CHECK(n == 1 && r[0].body[0] == 1 && r[0].body[2] == 2 && r[0].body[16] == 1
          && r[0].body[17] == 'y');
    n = request(r, 8, MTVM_MSG_INFO, 14, "\x03\0", 2);
    CHECK(n == 1 && r[0].body[0] == 10 && r[0].body[8] == 2 && r[0].body[9] == 'k');
    n = request(r, 8, MTVM_MSG_INFO, 15, "\x05\0", 2);
    CHECK(n == 1 && r[0].status == MTVM_STATUS_BAD_INDEX);

    /* bad CRC: dropped, answered by a NAK (seq 0) so the host resends at once;
     * then a good request works */
    len = frame(wire, MTVM_MSG_ECHO, 16, "hi", 2);
    wire[len - 1] ^= 1;
    mtvm_server_feed(&srv, wire, len);
    n = decode(r, 8);
    CHECK(n == 1 && r[0].type == MTVM_MSG_NAK && r[0].seq == 0 && srv.bad_packets == 1);
    CHECK(r[0].status == MTVM_STATUS_BAD_CRC);
    /* every packet the server sends is followed by 2 zero bytes */
    len = frame(wire, MTVM_MSG_ECHO, 40, "x", 1);
    mtvm_server_feed(&srv, wire, len);
    CHECK(out_n > 2 && out[out_n - 1] == 0 && out[out_n - 2] == 0 && out[out_n - 3] != 0);
    CHECK(decode(r, 8) == 1);
    n = request(r, 8, MTVM_MSG_ECHO, 16, "hi", 2);
    CHECK(n == 1 && r[0].body_n == 2 && memcmp(r[0].body, "hi", 2) == 0);

    /* oversized: answered PACKET_TOO_LARGE with its seq, nothing buffered past the end */
    memset(big, 0xff, sizeof(big));
    n = request(r, 8, MTVM_MSG_ECHO, 17, big, sizeof(big));
    CHECK(n == 1 && r[0].seq == 17 && r[0].status == MTVM_STATUS_PACKET_TOO_LARGE);

    /* unknown type, bad version, short packet */
    n = request(r, 8, 0x33, 18, NULL, 0);
    CHECK(n == 1 && r[0].status == MTVM_STATUS_UNKNOWN_REQUEST);
    out_n = 0;
    mtvm_frame_write((const uint8_t*)"\x07\x09\x13\x00", 4, NULL, 0);
    len = out_n; memcpy(wire, out, len); out_n = 0;
    mtvm_server_feed(&srv, wire, len);
    CHECK(decode(r, 8) == 1 && r[0].status == MTVM_STATUS_BAD_VERSION);
    mtvm_frame_write((const uint8_t*)"\x07\x01", 2, NULL, 0);
    len = out_n; memcpy(wire, out, len); out_n = 0;
    mtvm_server_feed(&srv, wire, len);
    CHECK(decode(r, 8) == 0);

    /* RESET zeroes tensors and adopts a nonce */
    n = request(r, 8, MTVM_MSG_RESET, 20, "\x01\0\0\0", 4);
    CHECK(n == 1 && r[0].nonce == 1 && x[3] == 0.0f && y[3] == 0.0f);

    /* a bad descriptor aborts init */
    model.num_inputs = 1;
    {
        mtvm_tensor_t bad = ins[0];
        bad.size_bytes = 15;
        model.inputs = &bad;
        mtvm_server_init(&srv, &model, "b", 1);
        CHECK(aborted == MTVM_STATUS_BAD_MODEL_DESCRIPTOR);
    }
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
