/* CRC-64/XZ of a file, printed in decimal (as Alibaba OSS's x-oss-hash-crc64ecma header writes it).
 * An independent reference for the S10 benchmark's header: bitwise table, not Swoop's code. */
#include <stdint.h>
#include <stdio.h>

int main(int argc, char **argv) {
    uint64_t table[256];
    for (int n = 0; n < 256; n++) {
        uint64_t c = (uint64_t)n;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0xC96C5795D7870F42ULL : c >> 1;
        table[n] = c;
    }
    if (argc != 2) { fprintf(stderr, "usage: crc64xz FILE\n"); return 2; }
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 1; }
    static unsigned char buffer[1 << 20];
    uint64_t crc = ~0ULL;
    size_t count;
    while ((count = fread(buffer, 1, sizeof buffer, f)) > 0)
        for (size_t i = 0; i < count; i++) crc = table[(crc ^ buffer[i]) & 0xFF] ^ (crc >> 8);
    if (ferror(f)) { perror(argv[1]); return 1; }
    printf("%llu\n", (unsigned long long)~crc);
    return 0;
}
