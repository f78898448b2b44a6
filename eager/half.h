/* eager/half.h — float16 and bfloat16 storage: conversion to and from float32 by bits, with
 * round-to-nearest-even and NaN / inf kept (a NaN stays a quiet NaN, overflow becomes inf), as
 * IEEE 754 and torch's casts do. Plain inline C, so the CPU kernels, the host side of the CUDA
 * module and the CUDA emulator all convert the same way. */
#ifndef DG_EAGER_HALF_H
#define DG_EAGER_HALF_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline uint32_t dg_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float dg_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float dg_bf16_to_f32(uint16_t h) { return dg_bits_f32((uint32_t)h << 16); }

static inline uint16_t dg_f32_to_bf16(float f) {
    uint32_t u = dg_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);   /* NaN: keep it, quiet */
    u += 0x7fffu + ((u >> 16) & 1);   /* ties go to the even result; overflow carries into inf */
    return (uint16_t)(u >> 16);
}

static inline float dg_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0x1f) return dg_bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) return dg_bits_f32(dg_f32_bits((float)m * 0x1p-24f) | sign);   /* zero and subnormals, exact */
    return dg_bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

static inline uint16_t dg_f32_to_f16(float f) {
    uint32_t u = dg_f32_bits(f), sign = (u >> 16) & 0x8000, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff));   /* NaN, quiet */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);   /* >= 65520 rounds to inf (65504 is the largest) */
    if (a < 0x38800000u) {
        /* below 2^-14 the result is subnormal: adding 0.5 puts the half's unit (2^-24) at the
         * float's last place, so the FPU's own round-to-nearest-even does the rounding */
        float r = dg_bits_f32(a) + 0.5f;
        return (uint16_t)(sign | (dg_f32_bits(r) - 0x3f000000u));
    }
    uint32_t odd = (a >> 13) & 1;
    a += 0xc8000fffu + odd;   /* rebias the exponent (15 - 127) and round the 13 dropped bits to even */
    return (uint16_t)(sign | (a >> 13));
}

#ifdef __cplusplus
}
#endif
#endif
