// Carry-less multiplication (PCLMULQDQ) for the 64-bit CRCs: the bulk of a buffer is folded into
// 16 bytes with the same CRC, which Swift's table code then finishes. Only on x86-64 with the
// instruction; elsewhere, or without it, swoop_has_clmul() says 0 and Swift's tables do it all.
#include "CSwoopSystem.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

int swoop_has_clmul(void) {
    return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
}

__attribute__((target("pclmul,sse4.1")))
void swoop_clmul_fold(uint64_t reg, const void *data, size_t length, uint64_t k_first, uint64_t k_second, void *out16) {
    const unsigned char *p = data;
    __m128i acc = _mm_loadu_si128((const __m128i *)p);
    acc = _mm_xor_si128(acc, _mm_set_epi64x(0, (long long)reg));
    const __m128i k = _mm_set_epi64x((long long)k_second, (long long)k_first);
    for (size_t at = 16; at + 16 <= length; at += 16) {
        __m128i first = _mm_clmulepi64_si128(acc, k, 0x00);   // low half (the earlier bytes) x k_first
        __m128i second = _mm_clmulepi64_si128(acc, k, 0x11);  // high half x k_second
        acc = _mm_xor_si128(_mm_xor_si128(first, second), _mm_loadu_si128((const __m128i *)(p + at)));
    }
    _mm_storeu_si128((__m128i *)out16, acc);
}
#else
int swoop_has_clmul(void) { return 0; }
void swoop_clmul_fold(uint64_t reg, const void *data, size_t length, uint64_t k_first, uint64_t k_second, void *out16) {}
#endif
