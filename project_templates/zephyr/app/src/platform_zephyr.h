/* platform_zephyr.h: what main.c uses of the Zephyr port (platform_zephyr.c)
 * besides the hooks of mtvm_platform.h. */
#ifndef MTVM_PLATFORM_ZEPHYR_H_
#define MTVM_PLATFORM_ZEPHYR_H_

#include <stddef.h>
#include <stdint.h>

/* Bytes the UART has received, up to max_bytes, without waiting (0: none). */
size_t mtvm_zephyr_uart_read(uint8_t* buf, size_t max_bytes);

/* Sleeps until the UART receives something (interrupt-driven), or yields
 * (a UART driver without interrupt support: polled). */
void mtvm_zephyr_uart_wait(void);

#endif /* MTVM_PLATFORM_ZEPHYR_H_ */
