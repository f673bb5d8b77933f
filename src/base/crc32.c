#include "base/crc32.h"

uint32_t crc32_update(uint32_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    crc ^= 0xffffffffu;
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xedb88320u & -(crc & 1));
    }
    return crc ^ 0xffffffffu;
}
