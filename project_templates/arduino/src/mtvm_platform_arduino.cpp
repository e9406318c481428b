/* mtvm_platform_arduino.cpp: the runtime's porting surface (mtvm_platform.h)
 * on the Arduino API: bytes through a Stream (Serial unless the sketch calls
 * mtvm_arduino_set_stream), time from micros() (1 MHz ticks; an interval
 * longer than 2^32 us, about 71 minutes, wraps). */
#include <Arduino.h>

#include "mtvm_arduino_config.h"
#include "mtvm_platform.h"

static Stream* mtvm_port = &Serial;
static uint32_t mtvm_timer_start_us;

void mtvm_arduino_set_stream(Stream* port)
{
    if (port != NULL) {
        mtvm_port = port;
    }
}

extern "C" size_t mtvm_arduino_read(uint8_t* buf, size_t max_bytes)
{
    size_t n = 0;
    while (n < max_bytes && mtvm_port->available() > 0) {
        int c = mtvm_port->read();
        if (c < 0) {
            break;
        }
        buf[n++] = (uint8_t)c;
    }
    return n;
}

extern "C" void mtvm_platform_init(void)
{
    mtvm_timer_start_us = (uint32_t)micros();
}

/* Blocks while the port's transmit buffer is full; bytes a port refuses
 * outright (a USB serial port nobody opened) are dropped: the host retries. */
extern "C" void mtvm_platform_write(const uint8_t* data, size_t size_bytes)
{
    while (size_bytes > 0) {
        size_t n = mtvm_port->write(data, size_bytes);
        if (n == 0 || n > size_bytes) {
            return;
        }
        data += n;
        size_bytes -= n;
    }
}

extern "C" void mtvm_platform_abort(int32_t code)
{
    mtvm_port->print("mtvm: abort ");
    mtvm_port->println((long)code);
    mtvm_port->flush();
    for (;;) {
        delay(1000);
    }
}

extern "C" void mtvm_platform_timer_start(void)
{
    mtvm_timer_start_us = (uint32_t)micros();
}

extern "C" uint64_t mtvm_platform_timer_stop_ticks(void)
{
    return (uint32_t)((uint32_t)micros() - mtvm_timer_start_us);
}

extern "C" uint64_t mtvm_platform_ticks_per_second(void)
{
    return 1000000u;
}
