"""Bare-metal firmware support for the cortex_m template: QEMU as a flash
target (mtvm.firmware.qemu), real boards' flash runners and serial-port
discovery (mtvm.firmware.runners), and the flash/RAM report of a linked ELF
(mtvm.firmware.size)."""
