/* Packet framing (see mtvm_framing.h and docs/runtime.md). */
#include "mtvm_framing.h"

#include "mtvm_platform.h"

enum { ST_IDLE = 0, ST_LENGTH, ST_PAYLOAD, ST_CRC };

uint16_t mtvm_crc16_update(uint16_t crc, const uint8_t* data, size_t size_bytes)
{
    size_t i;
    int bit;
    for (i = 0; i < size_bytes; ++i) {
        crc ^= (uint16_t)((uint16_t)data[i] << 8);
        for (bit = 0; bit < 8; ++bit) {
            crc = (crc & 0x8000u) ? (uint16_t)((crc << 1) ^ 0x1021u) : (uint16_t)(crc << 1);
        }
    }
    return crc;
}

/* Escaping writer through a small stack buffer. */
typedef struct {
    uint8_t buf[64];
    size_t n;
    uint16_t crc;
} frame_out_t;

static void out_flush(frame_out_t* o)
{
    if (o->n) {
        mtvm_platform_write(o->buf, o->n);
        o->n = 0;
    }
}

static void out_bytes(frame_out_t* o, const uint8_t* data, size_t size, int update_crc)
{
    size_t i;
    for (i = 0; i < size; ++i) {
        uint8_t b = data[i];
        if (o->n + 2 > sizeof(o->buf)) {
            out_flush(o);
        }
        if (b == MTVM_FRAME_ESCAPE) {
            o->buf[o->n++] = MTVM_FRAME_ESCAPE;
            if (update_crc) {
                o->crc = mtvm_crc16_update(o->crc, &b, 1);
            }
        }
        o->buf[o->n++] = b;
        if (update_crc) {
            o->crc = mtvm_crc16_update(o->crc, &b, 1);
        }
    }
}

void mtvm_frame_write(const uint8_t* head, size_t head_bytes,
                      const uint8_t* body, size_t body_bytes)
{
    frame_out_t o;
    uint8_t len[4];
    uint8_t crc[2];
    uint32_t total = (uint32_t)(head_bytes + body_bytes);
    o.n = 2;
    o.buf[0] = MTVM_FRAME_ESCAPE;
    o.buf[1] = MTVM_FRAME_START;
    o.crc = mtvm_crc16_update(0xFFFFu, o.buf, 2);
    len[0] = (uint8_t)total;
    len[1] = (uint8_t)(total >> 8);
    len[2] = (uint8_t)(total >> 16);
    len[3] = (uint8_t)(total >> 24);
    out_bytes(&o, len, 4, 1);
    if (head_bytes) {
        out_bytes(&o, head, head_bytes, 1);
    }
    if (body_bytes) {
        out_bytes(&o, body, body_bytes, 1);
    }
    crc[0] = (uint8_t)o.crc;
    crc[1] = (uint8_t)(o.crc >> 8);
    out_bytes(&o, crc, 2, 0);
    out_flush(&o);
}

void mtvm_unframer_init(mtvm_unframer_t* u, uint8_t* buf, uint32_t capacity)
{
    u->buf = buf;
    u->capacity = capacity;
    u->length = 0;
    u->received = 0;
    u->crc = 0xFFFFu;
    u->rx_crc = 0;
    u->state = ST_IDLE;
    u->escape = 0;
    u->counter = 0;
}

static void crc_data(mtvm_unframer_t* u, uint8_t b)
{
    static const uint8_t ff = MTVM_FRAME_ESCAPE;
    if (b == MTVM_FRAME_ESCAPE) {
        u->crc = mtvm_crc16_update(u->crc, &ff, 1);  /* the escape byte on the wire */
    }
    u->crc = mtvm_crc16_update(u->crc, &b, 1);
}

static mtvm_unframe_event_t data_byte(mtvm_unframer_t* u, uint8_t b)
{
    switch (u->state) {
    case ST_LENGTH:
        crc_data(u, b);
        u->length |= (uint32_t)b << (8u * u->counter);
        if (++u->counter == 4) {
            u->counter = 0;
            u->received = 0;
            u->state = u->length ? ST_PAYLOAD : ST_CRC;
        }
        return MTVM_UNFRAME_NONE;
    case ST_PAYLOAD:
        crc_data(u, b);
        if (u->received < u->capacity) {
            u->buf[u->received] = b;
        }
        if (++u->received == u->length) {
            u->state = ST_CRC;
            u->counter = 0;
        }
        return MTVM_UNFRAME_NONE;
    case ST_CRC:
        u->rx_crc |= (uint16_t)((uint16_t)b << (8u * u->counter));
        if (++u->counter < 2) {
            return MTVM_UNFRAME_NONE;
        }
        u->state = ST_IDLE;
        if (u->rx_crc != u->crc) {
            return MTVM_UNFRAME_BAD_CRC;
        }
        return u->length > u->capacity ? MTVM_UNFRAME_TOO_LARGE : MTVM_UNFRAME_PACKET;
    default:
        return MTVM_UNFRAME_NONE;   /* bytes between packets: ignored */
    }
}

mtvm_unframe_event_t mtvm_unframer_push(mtvm_unframer_t* u, uint8_t byte)
{
    if (!u->escape) {
        if (byte == MTVM_FRAME_ESCAPE) {
            u->escape = 1;
            return MTVM_UNFRAME_NONE;
        }
        return data_byte(u, byte);
    }
    u->escape = 0;
    if (byte == MTVM_FRAME_START) {
        static const uint8_t start[2] = {MTVM_FRAME_ESCAPE, MTVM_FRAME_START};
        /* A start always begins a new packet; one in progress is dropped
         * (a truncated packet is reported as a bad CRC would be). */
        mtvm_unframe_event_t ev = (u->state != ST_IDLE) ? MTVM_UNFRAME_BAD_CRC
                                                          : MTVM_UNFRAME_NONE;
        u->state = ST_LENGTH;
        u->length = 0;
        u->received = 0;
        u->counter = 0;
        u->rx_crc = 0;
        u->crc = mtvm_crc16_update(0xFFFFu, start, 2);
        return ev;
    }
    if (byte == MTVM_FRAME_NOP) {
        return MTVM_UNFRAME_NONE;
    }
    if (byte == MTVM_FRAME_ESCAPE) {
        if (u->state == ST_IDLE) {
            u->escape = 1;      /* between packets FF FF is noise: the 2nd FF may start FF FD */
            return MTVM_UNFRAME_NONE;
        }
        return data_byte(u, byte);
    }
    /* FF followed by anything else is not valid inside a packet: drop it. */
    if (u->state != ST_IDLE) {
        u->state = ST_IDLE;
        return MTVM_UNFRAME_BAD_CRC;
    }
    return MTVM_UNFRAME_NONE;
}
