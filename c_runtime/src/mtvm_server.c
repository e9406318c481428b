/* The host-driven RPC server (see mtvm_server.h, docs/runtime.md). */
#include "mtvm_server.h"

#include <string.h>

#include "mtvm_platform.h"

#define BODY_CAP (MTVM_MAX_PACKET_BYTES - MTVM_REPLY_HEADER_BYTES)

/* -- little-endian helpers ------------------------------------------------- */
static uint16_t get_u16(const uint8_t* p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static uint32_t get_u32(const uint8_t* p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16)
           | ((uint32_t)p[3] << 24);
}

static void put_u16(uint8_t* p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put_u32(uint8_t* p, uint32_t v)
{
    put_u16(p, (uint16_t)v);
    put_u16(p + 2, (uint16_t)(v >> 16));
}

static void put_u64(uint8_t* p, uint64_t v)
{
    put_u32(p, (uint32_t)v);
    put_u32(p + 4, (uint32_t)(v >> 32));
}

/* Appends a length-prefixed string (truncated to fit). */
static uint32_t put_str(uint8_t* body, uint32_t pos, const char* s)
{
    uint32_t n = 0;
    if (pos >= BODY_CAP) {
        return pos;
    }
    /* copied as it is measured: a memcpy of the clamped length made gcc -O3
     * warn of reading past a short literal */
    while (s && s[n] && n < 255 && n < BODY_CAP - pos - 1) {
        body[pos + 1 + n] = (uint8_t)s[n];
        ++n;
    }
    body[pos] = (uint8_t)n;
    return pos + 1 + n;
}

/* CRC-32 (IEEE 802.3, reflected, as zlib.crc32): the end-to-end check of
 * tensor data, over u16 index | u32 offset | bytes. 16-entry table. */
static const uint32_t crc32_nibble[16] = {
    0x00000000u, 0x1db71064u, 0x3b6e20c8u, 0x26d930acu, 0x76dc4190u, 0x6b6b51f4u,
    0x4db26158u, 0x5005713cu, 0xedb88320u, 0xf00f9344u, 0xd6d6a3e8u, 0xcb61b38cu,
    0x9b64c2b0u, 0x86d3d2d4u, 0xa00ae278u, 0xbdbdf21cu};

static uint32_t crc32_update(uint32_t crc, const uint8_t* p, uint32_t n)
{
    uint32_t i;
    for (i = 0; i < n; ++i) {
        crc ^= p[i];
        crc = (crc >> 4) ^ crc32_nibble[crc & 15u];
        crc = (crc >> 4) ^ crc32_nibble[crc & 15u];
    }
    return crc;
}

static uint32_t data_crc(uint16_t index, uint32_t offset, const uint8_t* data, uint32_t n)
{
    uint8_t head[6];
    uint32_t crc;
    put_u16(head, index);
    put_u32(head + 2, offset);
    crc = crc32_update(0xFFFFFFFFu, head, 6);
    return crc32_update(crc, data, n) ^ 0xFFFFFFFFu;
}

/* -- sending ----
 * Every packet is followed by 2 zero bytes (ignored between packets): if the
 * line lost a byte of the packet they complete it, so the host sees a bad
 * CRC at once instead of waiting for its timeout. */
static void send_packet(const uint8_t* head, size_t head_bytes, const uint8_t* body,
                        size_t body_bytes)
{
    static const uint8_t pad[2] = {0, 0};
    mtvm_frame_write(head, head_bytes, body, body_bytes);
    mtvm_platform_write(pad, sizeof(pad));
}

/* ----------------------------------------------------------------- */
static void fill_header(mtvm_server_t* s, uint8_t* h, uint8_t type, uint16_t seq,
                        uint16_t status)
{
    h[0] = type;
    h[1] = MTVM_PROTOCOL_VERSION;
    put_u16(h + 2, seq);
    put_u32(h + 4, s->nonce);
    put_u16(h + 8, status);
}

void mtvm_server_log(mtvm_server_t* s, uint8_t level, const char* text)
{
    uint8_t head[MTVM_REPLY_HEADER_BYTES + 1];
    size_t n = 0;
    fill_header(s, head, MTVM_MSG_LOG, 0, MTVM_STATUS_OK);
    head[MTVM_REPLY_HEADER_BYTES] = level;
    while (text && text[n] && n < MTVM_MAX_PACKET_BYTES - sizeof(head)) {
        ++n;
    }
#ifdef MTVM_USE_PLATFORM_LOG
    mtvm_platform_log(text);
#endif
    send_packet(head, sizeof(head), (const uint8_t*)text, n);
}

/* -- request handlers: body in, reply body out; return a status ------------- */
typedef struct {
    const uint8_t* in;
    uint32_t in_bytes;
    uint8_t* out;           /* BODY_CAP bytes */
    uint32_t out_bytes;
} call_t;

static uint16_t tensor_item(const mtvm_tensor_t* t, uint8_t is_output, call_t* c)
{
    uint32_t pos = 8, i;
    c->out[0] = is_output;
    c->out[1] = t->dtype;
    c->out[2] = t->ndim;
    c->out[3] = 0;
    put_u32(c->out + 4, t->size_bytes);
    for (i = 0; i < t->ndim; ++i, pos += 4) {
        put_u32(c->out + pos, (uint32_t)t->shape[i]);
    }
    c->out_bytes = put_str(c->out, pos, t->name);
    return MTVM_STATUS_OK;
}

static uint16_t do_info(mtvm_server_t* s, call_t* c)
{
    const mtvm_model_t* m = s->model;
    uint32_t item, pos;
    uint64_t tps;
    if (c->in_bytes != 2 && c->in_bytes != 6) {
        return MTVM_STATUS_BAD_LENGTH;
    }
    item = get_u16(c->in);
    if (c->in_bytes == 6 && get_u32(c->in + 2) != 0) {
        s->nonce = get_u32(c->in + 2);      /* the host assigns its session nonce */
    }
    if (item == 0) {
        tps = mtvm_platform_ticks_per_second();
        put_u16(c->out + 0, MTVM_PROTOCOL_VERSION);
        put_u16(c->out + 2, m->num_inputs);
        put_u16(c->out + 4, m->num_outputs);
        put_u16(c->out + 6, m->num_kernels);
        c->out[8] = m->profile_ticks ? 1 : 0;
        c->out[9] = 0;
        put_u32(c->out + 10, MTVM_MAX_PACKET_BYTES);
        put_u32(c->out + 14, m->workspace_bytes);
        put_u64(c->out + 18, tps);
        pos = put_str(c->out, 26, MTVM_RUNTIME_VERSION);
        pos = put_str(c->out, pos, s->board);
        pos = put_str(c->out, pos, m->name);
        c->out_bytes = put_str(c->out, pos, m->module_name);
        return MTVM_STATUS_OK;
    }
    item -= 1;
    if (item < m->num_inputs) {
        return tensor_item(&m->inputs[item], 0, c);
    }
    item -= m->num_inputs;
    if (item < m->num_outputs) {
        return tensor_item(&m->outputs[item], 1, c);
    }
    item -= m->num_outputs;
    if (item < m->num_kernels) {
        put_u64(c->out, m->kernel_macs ? m->kernel_macs[item] : 0);
        c->out_bytes = put_str(c->out, 8, m->kernel_names ? m->kernel_names[item] : "");
        return MTVM_STATUS_OK;
    }
    return MTVM_STATUS_BAD_INDEX;
}

static uint16_t do_write_input(mtvm_server_t* s, call_t* c)
{
    uint32_t index, offset, n;
    const mtvm_tensor_t* t;
    if (c->in_bytes < 10) {
        return MTVM_STATUS_BAD_LENGTH;
    }
    index = get_u16(c->in);
    offset = get_u32(c->in + 2);
    n = c->in_bytes - 10;
    if (data_crc((uint16_t)index, offset, c->in + 10, n) != get_u32(c->in + 6)) {
        return MTVM_STATUS_BAD_DATA_CRC;    /* corrupted on the way: not stored */
    }
    if (index >= s->model->num_inputs) {
        return MTVM_STATUS_BAD_INDEX;
    }
    t = &s->model->inputs[index];
    if (offset > t->size_bytes || n > t->size_bytes - offset) {
        return MTVM_STATUS_OUT_OF_RANGE;
    }
    if (n) {
        memcpy((uint8_t*)t->data + offset, c->in + 10, n);
    }
    return MTVM_STATUS_OK;
}

static uint16_t do_read_output(mtvm_server_t* s, call_t* c)
{
    uint32_t index, offset, n;
    const mtvm_tensor_t* t;
    if (c->in_bytes != 10) {
        return MTVM_STATUS_BAD_LENGTH;
    }
    index = get_u16(c->in);
    offset = get_u32(c->in + 2);
    n = get_u32(c->in + 6);
    if (index >= s->model->num_outputs) {
        return MTVM_STATUS_BAD_INDEX;
    }
    t = &s->model->outputs[index];
    if (n > BODY_CAP - 4) {
        return MTVM_STATUS_BAD_ARGUMENT;
    }
    if (offset > t->size_bytes || n > t->size_bytes - offset) {
        return MTVM_STATUS_OUT_OF_RANGE;
    }
    if (n) {
        memcpy(c->out + 4, (const uint8_t*)t->data + offset, n);
    }
    put_u32(c->out, data_crc((uint16_t)index, offset, c->out + 4, n));
    c->out_bytes = 4 + n;
    return MTVM_STATUS_OK;
}

static uint16_t do_run(mtvm_server_t* s, call_t* c)
{
    uint64_t ticks = 0;
    int32_t status;
    if (c->in_bytes != 0) {
        return MTVM_STATUS_BAD_LENGTH;
    }
    status = mtvm_model_run_timed(s->model, &ticks);
    put_u64(c->out, ticks);
    put_u32(c->out + 8, (uint32_t)status);
    c->out_bytes = 12;
    return status ? MTVM_STATUS_MODEL_FAILED : MTVM_STATUS_OK;
}

/* During a long request: reads the bytes that arrived meanwhile (if main
 * gave a poll function) and returns nonzero once a CANCEL came. Other
 * packets are dropped (the host retries them); a packet cut by the end of the
 * request continues in mtvm_server_feed(). The request being executed has
 * been decoded already, so the receive buffer may be reused. */
static int poll_cancel(mtvm_server_t* s)
{
    uint8_t buf[32];
    size_t n, i;
    const uint8_t* p = s->rx;
    if (s->poll == NULL) {
        return 0;
    }
    while (!s->cancel_pending && (n = s->poll(buf, sizeof(buf))) > 0) {
        for (i = 0; i < n; ++i) {
            switch (mtvm_unframer_push(&s->unframer, buf[i])) {
            case MTVM_UNFRAME_PACKET:
                if (s->unframer.length >= MTVM_REQUEST_HEADER_BYTES && p[0] == MTVM_MSG_CANCEL
                    && p[1] == MTVM_PROTOCOL_VERSION && !s->cancel_pending) {
                    s->cancel_pending = 1;
                    s->cancel_seq = get_u16(p + 2);
                    s->cancel_request_crc = mtvm_crc16_update(0xFFFFu, p, s->unframer.length);
                    s->cancel_request_bytes = s->unframer.length;
                } else {
                    ++s->dropped_while_busy;
                }
                break;
            case MTVM_UNFRAME_TOO_LARGE:
                ++s->dropped_while_busy;
                break;
            case MTVM_UNFRAME_BAD_CRC:
                ++s->bad_packets;
                break;
            default:
                break;
            }
        }
    }
    return s->cancel_pending;
}

static uint16_t do_time(mtvm_server_t* s, call_t* c)
{
    const mtvm_model_t* m = s->model;
    uint32_t number, i;
    uint64_t total = 0, ticks, polled = 0, poll_every;
    int32_t status = 0;
    if (c->in_bytes != 4) {
        return MTVM_STATUS_BAD_LENGTH;
    }
    number = get_u32(c->in);
    if (number == 0) {
        return MTVM_STATUS_BAD_ARGUMENT;
    }
    /* Between runs, at most every 1/64 s of timed runs, the server reads the
     * bytes that arrived meanwhile and stops on a CANCEL. */
    poll_every = mtvm_platform_ticks_per_second() / 64u;
    if (m->profile_ticks) {
        for (i = 0; i < number && status == 0; ++i) {
            status = mtvm_model_run_timed(m, &ticks);
            total += ticks;
            if (total - polled >= poll_every) {
                polled = total;
                if (poll_cancel(s)) {
                    ++i;
                    break;
                }
            }
        }
    } else {
        mtvm_platform_timer_start();
        for (i = 0; i < number && status == 0; ++i) {
            status = m->run();
            ticks = mtvm_platform_timer_stop_ticks();
            if (ticks - polled >= poll_every) {
                if (poll_cancel(s)) {
                    ++i;
                    break;
                }
                polled = ticks;
            }
        }
        total = mtvm_platform_timer_stop_ticks();
    }
    put_u32(c->out, i);
    put_u64(c->out + 4, total);
    put_u32(c->out + 12, (uint32_t)status);
    c->out_bytes = 16;
    if (status) {
        return MTVM_STATUS_MODEL_FAILED;
    }
    return s->cancel_pending ? MTVM_STATUS_CANCELLED : MTVM_STATUS_OK;
}

static uint16_t do_profile(mtvm_server_t* s, call_t* c)
{
    const mtvm_model_t* m = s->model;
    uint32_t start, count, i;
    uint64_t ticks;
    if (c->in_bytes != 3) {
        return MTVM_STATUS_BAD_LENGTH;
    }
    if (!m->profile_ticks) {
        return MTVM_STATUS_NOT_SUPPORTED;
    }
    start = get_u16(c->in + 1);
    if (start > m->num_kernels) {
        return MTVM_STATUS_BAD_INDEX;
    }
    /* runs: run the model that many times back to back; the ticks are the
     * last run's. The runs before it warm caches and branch predictors as a
     * loop of inferences does, rather than measuring the first run after the
     * host's round trip. */
    for (i = 0; i < c->in[0]; ++i) {
        if (mtvm_model_run_timed(m, &ticks) != 0) {
            return MTVM_STATUS_MODEL_FAILED;
        }
    }
    count = m->num_kernels - start;
    if (count > (BODY_CAP - 6) / 8) {
        count = (BODY_CAP - 6) / 8;
    }
    put_u16(c->out, m->num_kernels);
    put_u16(c->out + 2, (uint16_t)start);
    put_u16(c->out + 4, (uint16_t)count);
    for (i = 0; i < count; ++i) {
        put_u64(c->out + 6 + 8 * i, m->profile_ticks[start + i]);
    }
    c->out_bytes = 6 + 8 * count;
    return MTVM_STATUS_OK;
}

static uint16_t do_echo(call_t* c)
{
    if (c->in_bytes > BODY_CAP) {
        return MTVM_STATUS_BAD_LENGTH;
    }
    memcpy(c->out, c->in, c->in_bytes);
    c->out_bytes = c->in_bytes;
    return MTVM_STATUS_OK;
}

static void clear_tensors(const mtvm_model_t* m)
{
    uint16_t i;
    for (i = 0; i < m->num_inputs; ++i) {
        memset(m->inputs[i].data, 0, m->inputs[i].size_bytes);
    }
    for (i = 0; i < m->num_outputs; ++i) {
        memset(m->outputs[i].data, 0, m->outputs[i].size_bytes);
    }
}

static uint16_t do_reset(mtvm_server_t* s, call_t* c)
{
    if (c->in_bytes != 4) {
        return MTVM_STATUS_BAD_LENGTH;
    }
    clear_tensors(s->model);
    if (get_u32(c->in) != 0) {
        s->nonce = get_u32(c->in);
    }
    return MTVM_STATUS_OK;
}

/* -- dispatch ------------------------------------------------------------------ */
/* Tells the host a long request is executing, so it waits instead of resending. */
static void send_busy(mtvm_server_t* s, uint16_t seq)
{
    uint8_t head[MTVM_REPLY_HEADER_BYTES];
    fill_header(s, head, MTVM_MSG_BUSY, seq, MTVM_STATUS_OK);
    send_packet(head, sizeof(head), NULL, 0);
}

/* A request failed its CRC: the host resends at once instead of timing out. */
static void send_nak(mtvm_server_t* s)
{
    uint8_t head[MTVM_REPLY_HEADER_BYTES];
    fill_header(s, head, MTVM_MSG_NAK, 0, MTVM_STATUS_BAD_CRC);
    send_packet(head, sizeof(head), NULL, 0);
}

static void send_reply(mtvm_server_t* s)
{
    send_packet(s->reply, s->reply_bytes, NULL, 0);
}

static void handle_packet(mtvm_server_t* s, uint32_t length, int too_large)
{
    const uint8_t* p = s->rx;
    uint16_t seq, status, req_crc;
    uint8_t type;
    call_t c;
    if (length < MTVM_REQUEST_HEADER_BYTES) {
        ++s->bad_packets;           /* no sequence number to answer to */
        return;
    }
    type = p[0];
    seq = get_u16(p + 2);
    req_crc = mtvm_crc16_update(0xFFFFu, p, too_large ? s->unframer.capacity : length);
    if (s->have_cached && seq == s->cached_seq && req_crc == s->cached_request_crc
        && length == s->cached_request_bytes) {
        ++s->replays;               /* a retry: answer again, do not execute again */
        send_reply(s);
        return;
    }
    c.in = p + MTVM_REQUEST_HEADER_BYTES;
    c.in_bytes = length - MTVM_REQUEST_HEADER_BYTES;
    c.out = s->reply + MTVM_REPLY_HEADER_BYTES;
    c.out_bytes = 0;
    ++s->requests;
    if (too_large) {
        status = MTVM_STATUS_PACKET_TOO_LARGE;
    } else if (p[1] != MTVM_PROTOCOL_VERSION) {
        status = MTVM_STATUS_BAD_VERSION;
    } else {
        if (type == MTVM_MSG_RUN || type == MTVM_MSG_TIME
            || (type == MTVM_MSG_PROFILE && c.in_bytes == 3 && c.in[0]
                && s->model->profile_ticks)) {
            send_busy(s, seq);
        }
        switch (type) {
        case MTVM_MSG_INFO: status = do_info(s, &c); break;
        case MTVM_MSG_WRITE_INPUT: status = do_write_input(s, &c); break;
        case MTVM_MSG_RUN: status = do_run(s, &c); break;
        case MTVM_MSG_READ_OUTPUT: status = do_read_output(s, &c); break;
        case MTVM_MSG_TIME: status = do_time(s, &c); break;
        case MTVM_MSG_PROFILE: status = do_profile(s, &c); break;
        case MTVM_MSG_ECHO: status = do_echo(&c); break;
        case MTVM_MSG_RESET: status = do_reset(s, &c); break;
        case MTVM_MSG_CANCEL:   /* nothing running: answered at once */
            status = c.in_bytes ? MTVM_STATUS_BAD_LENGTH : MTVM_STATUS_OK;
            break;
        default: status = MTVM_STATUS_UNKNOWN_REQUEST; break;
        }
    }
    if (status != MTVM_STATUS_OK && status != MTVM_STATUS_MODEL_FAILED
        && status != MTVM_STATUS_CANCELLED) {
        c.out_bytes = 0;
    }
    fill_header(s, s->reply, (uint8_t)(type | MTVM_REPLY_FLAG), seq, status);
    s->reply_bytes = MTVM_REPLY_HEADER_BYTES + c.out_bytes;
    s->have_cached = 1;
    s->cached_seq = seq;
    s->cached_request_crc = req_crc;
    s->cached_request_bytes = length;
    send_reply(s);
    if (s->cancel_pending) {
        /* The CANCEL that stopped it is answered now that the device is idle
         * (and cached, so a retry of it is answered again). */
        s->cancel_pending = 0;
        fill_header(s, s->reply, (uint8_t)(MTVM_MSG_CANCEL | MTVM_REPLY_FLAG), s->cancel_seq,
                    MTVM_STATUS_OK);
        s->reply_bytes = MTVM_REPLY_HEADER_BYTES;
        s->cached_seq = s->cancel_seq;
        s->cached_request_crc = s->cancel_request_crc;
        s->cached_request_bytes = s->cancel_request_bytes;
        send_reply(s);
    }
}

void mtvm_server_set_poll(mtvm_server_t* s, size_t (*poll)(uint8_t* buf, size_t max_bytes))
{
    s->poll = poll;
}

void mtvm_server_init(mtvm_server_t* s, const mtvm_model_t* model, const char* board,
                      uint32_t boot_nonce)
{
    if (mtvm_model_check(model) != MTVM_STATUS_OK) {
        mtvm_platform_abort(MTVM_STATUS_BAD_MODEL_DESCRIPTOR);
    }
    memset(s, 0, sizeof(*s));
    s->model = model;
    s->board = board ? board : "";
    s->nonce = boot_nonce;
    mtvm_unframer_init(&s->unframer, s->rx, MTVM_MAX_PACKET_BYTES);
    mtvm_server_log(s, MTVM_LOG_DEBUG, "mtvm runtime " MTVM_RUNTIME_VERSION " ready");
}

void mtvm_server_feed(mtvm_server_t* s, const uint8_t* data, size_t size_bytes)
{
    size_t i;
    for (i = 0; i < size_bytes; ++i) {
        switch (mtvm_unframer_push(&s->unframer, data[i])) {
        case MTVM_UNFRAME_PACKET:
            handle_packet(s, s->unframer.length, 0);
            break;
        case MTVM_UNFRAME_TOO_LARGE:
            handle_packet(s, s->unframer.length, 1);
            break;
        case MTVM_UNFRAME_BAD_CRC:
            ++s->bad_packets;       /* dropped; the NAK makes the host resend now */
            send_nak(s);
            break;
        default:
            break;
        }
    }
}
