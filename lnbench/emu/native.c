/* The emulator's native helper: per-lane loops of the global memory path (memory.py), built with zig cc on first
 * use (native.py). Every function takes n accesses, access i covering the `nbytes` consecutive bytes from byte
 * offset offs[i] of one buffer, in lane order; they do exactly what the numpy formulation they replace did,
 * including which of two lanes touching one byte wins (the later) and, for a finding, which (lane, byte) is
 * reported first (row-major: the lowest i * nbytes + j). No floating point here. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NONE (-1)
#define SEVERAL (-2)

void lnbench_gather(const uint8_t *data, const int64_t *offs, int64_t n, int64_t nbytes, uint8_t *out) {
    for (int64_t i = 0; i < n; i++) memcpy(out + i * nbytes, data + offs[i], (size_t)nbytes);
}

void lnbench_scatter(uint8_t *data, const int64_t *offs, int64_t n, int64_t nbytes, const uint8_t *src) {
    for (int64_t i = 0; i < n; i++) memcpy(data + offs[i], src + i * nbytes, (size_t)nbytes);
}

/* flags[offs[i] + j] = 1 (a written-byte or touched-byte map) */
void lnbench_mark(uint8_t *flags, const int64_t *offs, int64_t n, int64_t nbytes) {
    for (int64_t i = 0; i < n; i++) memset(flags + offs[i], 1, (size_t)nbytes);
}

/* the first i * nbytes + j whose flag is 0, or -1 */
int64_t lnbench_first_unset(const uint8_t *flags, const int64_t *offs, int64_t n, int64_t nbytes) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < nbytes; j++)
            if (!flags[offs[i] + j]) return i * nbytes + j;
    return -1;
}

/* the race shadow's modifier test: the first byte another workgroup modified (atomic: plainly stored) */
int64_t lnbench_race_modified(const int32_t *modifier, const int64_t *offs, int64_t n, int64_t nbytes,
                              const int32_t *g, int atomic) {
    for (int64_t i = 0; i < n; i++) {
        const int32_t mine = g[i], own_atomic = -3 - g[i];
        for (int64_t j = 0; j < nbytes; j++) {
            const int32_t m = modifier[offs[i] + j];
            if (atomic ? (m >= 0 && m != mine) : (m != NONE && m != mine && m != own_atomic)) return i * nbytes + j;
        }
    }
    return -1;
}

/* the reader test of a store or atomic: the first byte another workgroup (or several) loaded */
int64_t lnbench_race_read(const int32_t *reader, const int64_t *offs, int64_t n, int64_t nbytes, const int32_t *g) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < nbytes; j++) {
            const int32_t r = reader[offs[i] + j];
            if (r != NONE && r != g[i]) return i * nbytes + j;
        }
    return -1;
}

/* a store: every byte's modifier becomes the lane's workgroup (the later lane wins); then the first byte whose
 * final modifier is another workgroup of this same access (two workgroups storing one byte), or -1 */
int64_t lnbench_race_store(int32_t *modifier, const int64_t *offs, int64_t n, int64_t nbytes, const int32_t *g) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < nbytes; j++) modifier[offs[i] + j] = g[i];
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < nbytes; j++)
            if (modifier[offs[i] + j] != g[i]) return i * nbytes + j;
    return -1;
}

/* a load (atomic == 0: readers become the workgroup, or SEVERAL where another read it) or an atomic (modifiers
 * become -3 - g, or SEVERAL where another workgroup modified it): every new value is computed from the state before
 * the access, then written in lane order (the later lane wins). Returns -1, or -2 when out of memory. */
int64_t lnbench_race_note(int32_t *shadow, const int64_t *offs, int64_t n, int64_t nbytes, const int32_t *g,
                          int atomic) {
    int32_t *next = malloc((size_t)(n * nbytes) * sizeof(int32_t) + 1);
    if (!next) return -2;
    for (int64_t i = 0; i < n; i++) {
        const int32_t mine = g[i], own_atomic = -3 - g[i];
        for (int64_t j = 0; j < nbytes; j++) {
            const int32_t v = shadow[offs[i] + j];
            next[i * nbytes + j] = atomic ? ((v == NONE || v == mine || v == own_atomic) ? own_atomic : SEVERAL)
                                          : ((v == NONE || v == mine) ? mine : SEVERAL);
        }
    }
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < nbytes; j++) shadow[offs[i] + j] = next[i * nbytes + j];
    free(next);
    return -1;
}

/* v_perm_b32 over n lanes: byte i of the result is byte (s2 >> 8i) & 0xFF of {s1 bytes 0-3, s0 bytes 4-7, the sign
 * of s1's low and high half, of s0's low and high half spread to a byte (8-11), 0 (12), 0xFF (13 and up)} */
void lnbench_perm_b32(const uint32_t *s0, const uint32_t *s1, const uint32_t *s2, int64_t n, uint32_t *out) {
    for (int64_t i = 0; i < n; i++) {
        const uint32_t a = s0[i], b = s1[i], sel = s2[i];
        uint32_t r = 0;
        for (int k = 0; k < 4; k++) {
            const uint32_t s = (sel >> (8 * k)) & 0xFF;
            uint32_t byte;
            if (s < 4) byte = (b >> (8 * s)) & 0xFF;
            else if (s < 8) byte = (a >> (8 * (s - 4))) & 0xFF;
            else if (s == 8) byte = (b >> 15) & 1 ? 0xFF : 0;
            else if (s == 9) byte = (b >> 31) & 1 ? 0xFF : 0;
            else if (s == 10) byte = (a >> 15) & 1 ? 0xFF : 0;
            else if (s == 11) byte = (a >> 31) & 1 ? 0xFF : 0;
            else if (s == 12) byte = 0;
            else byte = 0xFF;
            r |= byte << (8 * k);
        }
        out[i] = r;
    }
}
