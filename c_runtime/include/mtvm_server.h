/* mtvm_server.h: the host-driven RPC server.
 *
 * The server never does its own I/O. The board's main loop pushes received
 * bytes in with mtvm_server_feed(); complete requests are executed right
 * there and their replies leave through mtvm_platform_write(). A UART
 * interrupt should only queue bytes (ring buffer) and let the main loop feed
 * them: a RUN executes inside mtvm_server_feed().
 *
 *   static mtvm_server_t server;           // holds two packet buffers
 *   mtvm_platform_init();
 *   mtvm_server_init(&server, &mtvm_model, "my-board", boot_nonce);
 *   for (;;) { n = uart_read(buf); mtvm_server_feed(&server, buf, n); }
 *
 * Memory: 2 * MTVM_MAX_PACKET_BYTES + ~64 bytes, all inside mtvm_server_t.
 * See docs/runtime.md for the protocol the server speaks.
 */
#ifndef MTVM_SERVER_H_
#define MTVM_SERVER_H_

#include <stddef.h>
#include <stdint.h>

#include "mtvm_framing.h"
#include "mtvm_model.h"
#include "mtvm_protocol.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest payload (bytes, excluding framing) the device accepts and sends;
 * announced in INFO. Override with -DMTVM_MAX_PACKET_BYTES=n (>= 64). */
#ifndef MTVM_MAX_PACKET_BYTES
#define MTVM_MAX_PACKET_BYTES MTVM_DEFAULT_MAX_PACKET_BYTES
#endif
#if MTVM_MAX_PACKET_BYTES < MTVM_MIN_PACKET_BYTES
#error "MTVM_MAX_PACKET_BYTES must be at least MTVM_MIN_PACKET_BYTES"
#endif

typedef struct mtvm_server {
    const mtvm_model_t* model;
    const char* board;
    uint32_t nonce;            /* boot nonce, sent in every reply */
    mtvm_unframer_t unframer;
    /* Exactly-once: the last request's seq and CRC and its cached reply. */
    uint8_t have_cached;
    uint16_t cached_seq;
    uint16_t cached_request_crc;
    uint32_t cached_request_bytes;
    uint32_t reply_bytes;
    uint32_t requests;         /* executed requests (diagnostics) */
    uint32_t replays;          /* replies re-sent from the cache */
    uint32_t bad_packets;      /* CRC errors and malformed packets */
    /* Cancel polling during TIME (see mtvm_server_set_poll). */
    size_t (*poll)(uint8_t* buf, size_t max_bytes);
    uint8_t cancel_pending;
    uint16_t cancel_seq;
    uint16_t cancel_request_crc;
    uint32_t cancel_request_bytes;
    uint32_t dropped_while_busy;   /* packets other than CANCEL received during TIME */
    uint8_t rx[MTVM_MAX_PACKET_BYTES];
    uint8_t reply[MTVM_MAX_PACKET_BYTES];
} mtvm_server_t;

/* Checks the model descriptor (mtvm_platform_abort on inconsistency), clears
 * the state and sends a LOG "ready" message. boot_nonce should differ between
 * boots when the board can (RNG, uninitialized RAM, clock); the host also
 * assigns its own nonce on connect, so a constant works too. */
void mtvm_server_init(mtvm_server_t* server, const mtvm_model_t* model,
                      const char* board, uint32_t boot_nonce);

/* Pushes received bytes; executes every request they complete. */
void mtvm_server_feed(mtvm_server_t* server, const uint8_t* data, size_t size_bytes);

/* Optional: a non-blocking read (returns the bytes available now, up to
 * max_bytes, or 0) the server calls between the runs of a TIME request to
 * notice a CANCEL from the host, so a long benchmark can be interrupted.
 * Bytes of other packets read this way are dropped (the host retries them).
 * On a UART ring buffer this is the ring's read function. Without it, TIME
 * runs to completion. */
void mtvm_server_set_poll(mtvm_server_t* server, size_t (*poll)(uint8_t* buf, size_t max_bytes));

/* Sends an unrequested LOG packet (level MTVM_LOG_*). Text longer than a
 * packet is truncated. Must not be called from inside an interrupt. */
void mtvm_server_log(mtvm_server_t* server, uint8_t level, const char* text);

#ifdef __cplusplus
}
#endif
#endif /* MTVM_SERVER_H_ */
