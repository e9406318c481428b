/* mtvm_framing.h: packet framing, byte-compatible with microTVM's.
 *
 *   FF FD | u32 payload length (LE) | payload | u16 CRC (LE)
 *
 * CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF) over the escaped bytes from
 * FF FD through the payload. Inside a packet a data byte FF is sent as FF FF
 * (the CRC bytes are escaped too but not covered by the CRC); FF FE is a
 * no-op (ignored, not covered by the CRC); FF FD always starts a new packet,
 * aborting one in progress.
 */
#ifndef MTVM_FRAMING_H_
#define MTVM_FRAMING_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MTVM_FRAME_ESCAPE 0xFF
#define MTVM_FRAME_START 0xFD
#define MTVM_FRAME_NOP 0xFE

/* CRC-16/CCITT-FALSE update; start with crc = 0xFFFF. */
uint16_t mtvm_crc16_update(uint16_t crc, const uint8_t* data, size_t size_bytes);

/* Writes one whole packet through mtvm_platform_write (escaping on the fly,
 * through a small stack buffer). The payload may be given in two parts
 * (header + body) to avoid a copy; either may be NULL with size 0. */
void mtvm_frame_write(const uint8_t* head, size_t head_bytes,
                      const uint8_t* body, size_t body_bytes);

/* Events returned by mtvm_unframer_push(). */
typedef enum {
    MTVM_UNFRAME_NONE = 0,     /* byte consumed, nothing complete */
    MTVM_UNFRAME_PACKET,       /* a valid packet is in buf[0 .. length) */
    MTVM_UNFRAME_BAD_CRC,      /* a packet ended with a wrong CRC: dropped */
    MTVM_UNFRAME_TOO_LARGE     /* a packet with a valid CRC was longer than
                                * the buffer: buf holds its first capacity
                                * bytes, length its announced length */
} mtvm_unframe_event_t;

/* Receiving state machine: one packet buffer supplied by the caller. */
typedef struct mtvm_unframer {
    uint8_t* buf;
    uint32_t capacity;
    uint32_t length;       /* announced payload length */
    uint32_t received;     /* payload bytes received */
    uint16_t crc;          /* running CRC */
    uint16_t rx_crc;
    uint8_t state;
    uint8_t escape;        /* previous byte was FF */
    uint8_t counter;       /* bytes of length / CRC field received */
} mtvm_unframer_t;

void mtvm_unframer_init(mtvm_unframer_t* u, uint8_t* buf, uint32_t capacity);

/* Pushes one received byte; returns the event it completed (if any). After
 * PACKET or TOO_LARGE the buffer is valid until the next push. */
mtvm_unframe_event_t mtvm_unframer_push(mtvm_unframer_t* u, uint8_t byte);

#ifdef __cplusplus
}
#endif
#endif /* MTVM_FRAMING_H_ */
