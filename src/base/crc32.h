/* CRC-32 (IEEE 802.3, as zlib's crc32()): the checksum of the tune
 * journal's lines and of the fleet controller's history file. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* The CRC of BUF continued from CRC (0 to start): crc32_update(0, "123456789", 9)
 * is 0xcbf43926. Bitwise, no table: no shared state, safe from any thread. */
uint32_t crc32_update(uint32_t crc, const void *buf, size_t len);
