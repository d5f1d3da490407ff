/*
 * crc32c.h - CRC-32C (Castagnoli), as Kafka's record batch v2 uses it.
 *
 * The CRC is a running value: start with 0, feed pieces in order, and the
 * result equals the CRC of the concatenation.  Pre- and post-inversion are
 * done inside, so cn_crc32c(0, "123456789", 9) == 0xE3069283 like Java's
 * java.util.zip.CRC32C.
 */
#ifndef CN_BASE_CRC32C_H
#define CN_BASE_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Picks the SSE4.2 path when the CPU has it, else the table path. */
uint32_t cn_crc32c(uint32_t crc, const void *p, size_t n);

/* Table-driven (slicing-by-8) path; works on any CPU. */
uint32_t cn_crc32c_sw(uint32_t crc, const void *p, size_t n);

/*
 * SSE4.2 path (crc32 instruction, three interleaved streams for long
 * inputs).  Call only when cn_crc32c_hw_available() says so; it is exported
 * so tests can compare both paths.
 */
uint32_t cn_crc32c_hw(uint32_t crc, const void *p, size_t n);
bool cn_crc32c_hw_available(void);

#endif
