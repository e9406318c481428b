/* C unit test of c_runtime framing against tests/runtime/framing_vectors.txt
 * (the same vectors the Python tests use). Usage: test_framing VECTORS_FILE.
 * Also checks the CRC of "123456789" (CRC-16/CCITT-FALSE check value 0x29B1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mtvm_framing.h"
#include "mtvm_platform.h"

static uint8_t captured[65536];
static size_t captured_n;

void mtvm_platform_init(void) {}
void mtvm_platform_write(const uint8_t* data, size_t n)
{
    if (captured_n + n > sizeof(captured)) { fprintf(stderr, "capture overflow\n"); exit(2); }
    memcpy(captured + captured_n, data, n);
    captured_n += n;
}
void mtvm_platform_abort(int32_t code) { fprintf(stderr, "abort %d\n", (int)code); exit(3); }
void mtvm_platform_timer_start(void) {}
uint64_t mtvm_platform_timer_stop_ticks(void) { return 0; }
uint64_t mtvm_platform_ticks_per_second(void) { return 1; }
void mtvm_platform_log(const char* m) { (void)m; }

static size_t unhex(const char* s, uint8_t* out)
{
    size_t n = 0;
    if (strcmp(s, "-") == 0) return 0;
    while (s[0] && s[1] && s[0] != ',') {
        unsigned v;
        sscanf(s, "%2x", &v);
        out[n++] = (uint8_t)v;
        s += 2;
    }
    return n;
}

static int failures, checks;

static void expect(int ok, const char* name, const char* what)
{
    ++checks;
    if (!ok) { ++failures; fprintf(stderr, "FAIL %s: %s\n", name, what); }
}

/* Decodes wire; returns the number of packets, payloads concatenated in out. */
static int decode(const uint8_t* wire, size_t n, uint8_t* out, size_t* lens)
{
    static uint8_t buf[4096];
    mtvm_unframer_t u;
    size_t i, pos = 0;
    int count = 0;
    mtvm_unframer_init(&u, buf, sizeof(buf));
    for (i = 0; i < n; ++i) {
        if (mtvm_unframer_push(&u, wire[i]) == MTVM_UNFRAME_PACKET) {
            memcpy(out + pos, buf, u.length);
            lens[count++] = u.length;
            pos += u.length;
        }
    }
    return count;
}

int main(int argc, char** argv)
{
    static char line[65536];
    static uint8_t a[16384], b[16384], c[16384], got[16384];
    size_t lens[64];
    FILE* f;
    if (argc != 2 || !(f = fopen(argv[1], "r"))) { fprintf(stderr, "usage: test_framing FILE\n"); return 2; }
    expect(mtvm_crc16_update(0xFFFF, (const uint8_t*)"123456789", 9) == 0x29B1, "crc", "check value");
    while (fgets(line, sizeof(line), f)) {
        char kind[4], name[128], f1[20000], f2[20000];
        if (line[0] == '#' || line[0] == '\n') continue;
        if (sscanf(line, "%3s %127s %19999s %19999s", kind, name, f1, f2) != 4) {
            fprintf(stderr, "bad line: %s", line);
            return 2;
        }
        if (kind[0] == 'E') {
            size_t np = unhex(f1, a), nw = unhex(f2, b);
            int count;
            captured_n = 0;
            mtvm_frame_write(a, np / 2, a + np / 2, np - np / 2);   /* in two parts */
            expect(captured_n == nw && memcmp(captured, b, nw) == 0, name, "encode");
            count = decode(b, nw, got, lens);
            expect(count == 1 && lens[0] == np && memcmp(got, a, np) == 0, name, "decode");
        } else {
            size_t nw = unhex(f1, b), i, pos = 0, total = 0;
            int count = decode(b, nw, got, lens), want = 0;
            const char* s = f2;
            if (strcmp(f2, "none") != 0) {
                for (;;) {
                    size_t n = unhex(s, c + total);
                    ++want;
                    if (count >= want) {
                        expect(lens[want - 1] == n && memcmp(got + pos, c + total, n) == 0,
                               name, "payload");
                        pos += lens[want - 1];
                    }
                    total += n;
                    s = strchr(s, ',');
                    if (!s) break;
                    ++s;
                }
            }
            (void)i;
            expect(count == want, name, "packet count");
        }
    }
    fclose(f);
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
