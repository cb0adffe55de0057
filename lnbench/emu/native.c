/* The emulator's native helper: per-lane loops of the global memory path (memory.py), built with zig cc on first
 * use (native.py). Every function takes n accesses, access i covering the `nbytes` consecutive bytes from byte
 * offset offs[i] of one buffer, in lane order; they do exactly what the numpy formulation they replace did,
 * including which of two lanes touching one byte wins (the later) and, for a finding, which (lane, byte) is
 * reported first (row-major: the lowest i * nbytes + j). Floating point only in lnbench_fma_f32 (built with
 * -ffp-contract=off: no expression is fused behind the code's back). */
#include <cpuid.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NONE (-1)
#define SEVERAL (-2)

/* Scratch memory kept between calls, per thread and slot: a fresh malloc of a few hundred KiB is an mmap whose pages
 * fault in again on every call, which cost more than the loops themselves. NULL when out of memory. */
#define SCRATCH_SLOTS 10
static __thread void *scratch_buf[SCRATCH_SLOTS];
static __thread size_t scratch_cap[SCRATCH_SLOTS];

static void *scratch(int slot, size_t bytes) {
    if (bytes > scratch_cap[slot]) {
        free(scratch_buf[slot]);
        scratch_buf[slot] = malloc(bytes);
        scratch_cap[slot] = scratch_buf[slot] ? bytes : 0;
    }
    return scratch_buf[slot];
}

/* memcpy/memset of one access's bytes: the usual sizes as constants, which the compiler turns into plain moves (a
 * memcpy of a run-time size is a library call per lane) */
static inline void copy_access(uint8_t *dst, const uint8_t *src, int64_t nbytes) {
    switch (nbytes) {
    case 1: *dst = *src; return;
    case 2: memcpy(dst, src, 2); return;
    case 4: memcpy(dst, src, 4); return;
    case 8: memcpy(dst, src, 8); return;
    case 16: memcpy(dst, src, 16); return;
    default: memcpy(dst, src, (size_t)nbytes);
    }
}

static inline void set_access(uint8_t *dst, int64_t nbytes) {
    switch (nbytes) {
    case 1: *dst = 1; return;
    case 2: memset(dst, 1, 2); return;
    case 4: memset(dst, 1, 4); return;
    case 8: memset(dst, 1, 8); return;
    case 16: memset(dst, 1, 16); return;
    default: memset(dst, 1, (size_t)nbytes);
    }
}

void lnbench_gather(const uint8_t *data, const int64_t *offs, int64_t n, int64_t nbytes, uint8_t *out) {
    for (int64_t i = 0; i < n; i++) copy_access(out + i * nbytes, data + offs[i], nbytes);
}

void lnbench_scatter(uint8_t *data, const int64_t *offs, int64_t n, int64_t nbytes, const uint8_t *src) {
    for (int64_t i = 0; i < n; i++) copy_access(data + offs[i], src + i * nbytes, nbytes);
}

/* flags[offs[i] + j] = 1 (a written-byte or touched-byte map) */
void lnbench_mark(uint8_t *flags, const int64_t *offs, int64_t n, int64_t nbytes) {
    for (int64_t i = 0; i < n; i++) set_access(flags + offs[i], nbytes);
}

/* The tests below run per lane as a branch-free reduction over its bytes (which the compiler vectorizes); only a lane
 * that has a finding is scanned again for its first byte. */

/* the first i * nbytes + j whose flag is 0, or -1 */
static inline __attribute__((always_inline)) int64_t first_unset(const uint8_t *flags, const int64_t *offs, int64_t n,
                                                               int64_t nbytes) {
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *f = flags + offs[i];
        int unset = 0;
        for (int64_t j = 0; j < nbytes; j++) unset |= !f[j];
        if (unset)
            for (int64_t j = 0; j < nbytes; j++)
                if (!f[j]) return i * nbytes + j;
    }
    return -1;
}

/* the race shadow's modifier test: the first byte another workgroup modified (atomic: plainly stored) */
static inline int other_modifier(int32_t m, int32_t mine, int32_t own_atomic, int atomic) {
    return atomic ? (m >= 0) & (m != mine) : (m != NONE) & (m != mine) & (m != own_atomic);
}

static inline __attribute__((always_inline)) int64_t race_modified(const int32_t *modifier, const int64_t *offs, int64_t n, const int32_t *g,
                                                                 int atomic, int64_t nbytes) {
    for (int64_t i = 0; i < n; i++) {
        const int32_t mine = g[i], own_atomic = -3 - g[i], *m = modifier + offs[i];
        int hit = 0;
        if (atomic) for (int64_t j = 0; j < nbytes; j++) hit |= other_modifier(m[j], mine, own_atomic, 1);
        else for (int64_t j = 0; j < nbytes; j++) hit |= other_modifier(m[j], mine, own_atomic, 0);
        if (hit)
            for (int64_t j = 0; j < nbytes; j++)
                if (other_modifier(m[j], mine, own_atomic, atomic)) return i * nbytes + j;
    }
    return -1;
}

/* the reader test of a store or atomic: the first byte another workgroup (or several) loaded */
static inline __attribute__((always_inline)) int64_t race_read(const int32_t *reader, const int64_t *offs, int64_t n, const int32_t *g,
                                                             int64_t nbytes) {
    for (int64_t i = 0; i < n; i++) {
        const int32_t mine = g[i], *r = reader + offs[i];
        int hit = 0;
        for (int64_t j = 0; j < nbytes; j++) hit |= (r[j] != NONE) & (r[j] != mine);
        if (hit)
            for (int64_t j = 0; j < nbytes; j++)
                if (r[j] != NONE && r[j] != mine) return i * nbytes + j;
    }
    return -1;
}

/* a store: every byte's modifier becomes the lane's workgroup (the later lane wins); then the first byte whose
 * final modifier is another workgroup of this same access (two workgroups storing one byte), or -1 */
static inline __attribute__((always_inline)) int64_t race_store(int32_t *modifier, const int64_t *offs, int64_t n, const int32_t *g,
                                                              int64_t nbytes) {
    for (int64_t i = 0; i < n; i++) {
        int32_t *m = modifier + offs[i];
        const int32_t mine = g[i];
        for (int64_t j = 0; j < nbytes; j++) m[j] = mine;
    }
    for (int64_t i = 0; i < n; i++) {
        const int32_t mine = g[i], *m = modifier + offs[i];
        int hit = 0;
        for (int64_t j = 0; j < nbytes; j++) hit |= m[j] != mine;
        if (hit)
            for (int64_t j = 0; j < nbytes; j++)
                if (m[j] != mine) return i * nbytes + j;
    }
    return -1;
}

/* a load (atomic == 0: readers become the workgroup, or SEVERAL where another read it) or an atomic (modifiers
 * become -3 - g, or SEVERAL where another workgroup modified it): every new value is computed from the state before
 * the access, then written in lane order (the later lane wins). Returns -1, or -2 when out of memory. */
static inline __attribute__((always_inline)) int64_t race_note(int32_t *shadow, const int64_t *offs, int64_t n, const int32_t *g, int atomic,
                                                             int64_t nbytes) {
    int disjoint = 1;                            /* lanes in rising order, none touching another's bytes: in place */
    for (int64_t i = 1; i < n; i++) disjoint &= offs[i] >= offs[i - 1] + nbytes;
    int32_t *next = disjoint ? NULL : scratch(0, (size_t)(n * nbytes) * sizeof(int32_t) + 1);
    if (!disjoint && !next) return -2;
    for (int64_t i = 0; i < n; i++) {
        const int32_t mine = g[i], own_atomic = -3 - g[i], *v = shadow + offs[i];
        int32_t *out = disjoint ? shadow + offs[i] : next + i * nbytes;     /* (each byte read before it is written) */
        if (atomic)
            for (int64_t j = 0; j < nbytes; j++)
                out[j] = ((v[j] == NONE) | (v[j] == mine) | (v[j] == own_atomic)) ? own_atomic : SEVERAL;
        else
            for (int64_t j = 0; j < nbytes; j++) out[j] = ((v[j] == NONE) | (v[j] == mine)) ? mine : SEVERAL;
    }
    if (!disjoint)
        for (int64_t i = 0; i < n; i++) memcpy(shadow + offs[i], next + i * nbytes, (size_t)nbytes * sizeof(int32_t));
    return -1;
}

/* The entry points: each loop above built for the common access sizes with the size a constant (the compiler unrolls
 * the byte loops; a loop of unknown length per lane cost more than its work for 1- and 2-byte accesses), and once for
 * any other size. */
#define BY_SIZE(body, nbytes, ...)                                                                                     \
    switch (nbytes) {                                                                                                  \
    case 1: return body(__VA_ARGS__, 1);                                                                               \
    case 2: return body(__VA_ARGS__, 2);                                                                               \
    case 4: return body(__VA_ARGS__, 4);                                                                               \
    case 8: return body(__VA_ARGS__, 8);                                                                               \
    case 16: return body(__VA_ARGS__, 16);                                                                             \
    default: return body(__VA_ARGS__, nbytes);                                                                         \
    }

int64_t lnbench_first_unset(const uint8_t *flags, const int64_t *offs, int64_t n, int64_t nbytes) {
    BY_SIZE(first_unset, nbytes, flags, offs, n)
}

int64_t lnbench_race_modified(const int32_t *modifier, const int64_t *offs, int64_t n, int64_t nbytes,
                              const int32_t *g, int atomic) {
    BY_SIZE(race_modified, nbytes, modifier, offs, n, g, atomic)
}

int64_t lnbench_race_read(const int32_t *reader, const int64_t *offs, int64_t n, int64_t nbytes, const int32_t *g) {
    BY_SIZE(race_read, nbytes, reader, offs, n, g)
}

int64_t lnbench_race_store(int32_t *modifier, const int64_t *offs, int64_t n, int64_t nbytes, const int32_t *g) {
    BY_SIZE(race_store, nbytes, modifier, offs, n, g)
}

int64_t lnbench_race_note(int32_t *shadow, const int64_t *offs, int64_t n, int64_t nbytes, const int32_t *g,
                          int atomic) {
    BY_SIZE(race_note, nbytes, shadow, offs, n, g, atomic)
}

/* Raw buffer loads and stores of every lane of every wave of a batch (fastpath_buffer.py), each in two calls: the
 * addresses, then the access with every check. Lane i (wave i / 64) reads its offset from register row `voff` of the
 * register file (NULL: offen=0, offset 0); per wave base[w] (the descriptor's base address), off0[w] (instruction
 * offset + soffset) and nrec[w] (num_records). The second call does what memory.py's load or store does for an access
 * that lies in one buffer, in its order (initcheck, the race tests, the race shadow's update, the data, the written
 * and touched maps), and gives a finding back before it changes anything, so that the caller can run the general path
 * and raise its fault; the one exception is the store's clash of two workgroups in this very access, found after the
 * shadow's update, as memory.py finds it. */

/* The lanes of an access without an index register through the descriptors at s[r:r+4] of every wave (S: n_waves
 * rows of 128 SGPRs): addr[i] = base + offset of each lane, soffset from SGPR soff_sgpr (-1: the constant soff_const);
 * a lane is in range as the handler tests it (a raw buffer: the bytes of a component inside num_records; one with a
 * stride: index 0 below num_records, every component). valid[i]: lane i's `nbytes` (all `nbytes / size` components)
 * in range. out[0], out[1]: the lowest and highest address of a valid lane, out[2]: their bits OR-ed, out[3]: how many
 * lanes are valid. Returns 2 when every lane is valid; 3 (every descriptor raw) or 4 (some with a stride) when every
 * lane has all its components in range or none; else 1 (every descriptor raw) or 0. */
int64_t lnbench_buf_addrs(const uint32_t *voff, int64_t n_waves, const uint32_t *S, int64_t r, int64_t soff_sgpr,
                          int64_t soff_const, int64_t imm, int64_t nbytes, int64_t size, int64_t *addr, uint8_t *valid,
                          int64_t *out) {
    int inside = 1, strided = 0, whole = 1;
    int64_t lo = INT64_MAX, hi = INT64_MIN, bits = 0, count = 0;
    for (int64_t w = 0; w < n_waves; w++) {
        const uint32_t *d = S + w * 128 + r;
        const int64_t base = (int64_t)d[0] | ((int64_t)(d[1] & 0xFFFF) << 32);
        const int64_t off0 = imm + (soff_sgpr >= 0 ? (int64_t)S[w * 128 + soff_sgpr] : soff_const);
        const int64_t start = base + off0;
        const int with_stride = (d[1] & 0x3FFF0000u) != 0;
        strided |= with_stride;
        /* the highest offset register value with every component in range, and with none (component 0 out) */
        const int64_t all_in = with_stride ? (d[2] > 0 ? INT64_MAX : -1) : (int64_t)d[2] - nbytes - off0;
        const int64_t none_above = with_stride ? (d[2] > 0 ? INT64_MAX : -1) : (int64_t)d[2] - size - off0;
        for (int64_t l = 0; l < 64; l++) {
            const int64_t i = w * 64 + l, v = voff ? (int64_t)voff[i] : 0, a = start + v;
            const int in = v <= all_in;
            inside &= in;
            whole &= in | (v > none_above);
            valid[i] = (uint8_t)in;
            addr[i] = a;
            if (in) {
                lo = a < lo ? a : lo;
                hi = a > hi ? a : hi;
                bits |= a;
                count++;
            }
        }
    }
    out[0] = lo;
    out[1] = hi;
    out[2] = bits;
    out[3] = count;
    return inside ? 2 : whole ? (strided ? 4 : 3) : strided ? 0 : 1;
}

/* addr -> byte offsets into the buffer (in place); g[i]: lane i's workgroup; unit[i]: its first race-shadow entry */
static void buf_lanes(int64_t *addr, int64_t n, int64_t rbase, const int64_t *wave_group, int shift, int32_t *g,
                      int64_t *unit) {
    for (int64_t i = 0; i < n; i++) {
        addr[i] -= rbase;
        if (g) {
            g[i] = (int32_t)wave_group[i / 64];
            unit[i] = addr[i] >> shift;
        }
    }
}

static inline uint32_t widened(const uint8_t *at, int64_t size, int sign) {
    if (size == 2) {
        uint16_t h;
        memcpy(&h, at, 2);
        return sign ? (uint32_t)(int32_t)(int16_t)h : h;
    }
    return sign ? (uint32_t)(int32_t)(int8_t)at[0] : at[0];
}

/* A load of `count` components of `size` bytes (sub-dword loads zero- or sign-extended) into register rows dst,
 * dst+1, ... of R (rows of row_len lanes). written: initcheck's map (NULL: not checked); race: modifier (NULL: no
 * modifier yet) and reader (NULL: race checker off), entries of 1 << shift bytes. touched: the footprint's load map
 * (NULL: none). Returns 0, or 1 for a finding (nothing changed), -2 when out of memory. */
static inline __attribute__((always_inline)) int64_t buf_load(const uint8_t *data, int64_t rbase, int64_t *addr,
        int64_t n, const uint8_t *written, const int32_t *modifier, int32_t *reader, const int shift,
        const int64_t *wave_group, uint8_t *touched, uint32_t *R, int64_t row_len, int64_t dst, const int64_t count,
        const int64_t size, int sign) {
    const int64_t nbytes = count * size, per = nbytes >> shift;
    int32_t *g = reader ? scratch(3, (size_t)n * sizeof(int32_t) + 1) : NULL;
    int64_t *unit = reader ? scratch(4, (size_t)n * sizeof(int64_t) + 1) : NULL;
    if (reader && (!g || !unit)) return -2;
    buf_lanes(addr, n, rbase, wave_group, shift, g, unit);
    if (written && first_unset(written, addr, n, nbytes) >= 0) return 1;
    if (reader) {
        if (modifier && race_modified(modifier, unit, n, g, 0, per) >= 0) return 1;
        if (race_note(reader, unit, n, g, 0, per) == -2) return -2;
    }
    uint32_t *out = R + dst * row_len;
    if (size == 4)
        for (int64_t j = 0; j < count; j++)
            for (int64_t i = 0; i < n; i++) memcpy(out + j * row_len + i, data + addr[i] + 4 * j, 4);
    else
        for (int64_t i = 0; i < n; i++) out[i] = widened(data + addr[i], size, sign);
    if (touched)
        for (int64_t i = 0; i < n; i++) set_access(touched + addr[i], nbytes);
    return 0;
}

/* A buffer load's or store's call of CALL(count, size, shift) (buf_load, buf_store), with constant loop bounds for
   the usual shapes: dword rows (race shadow per dword or per byte) and sub-dwords; any other shape as given. */
#define BUF_SHAPES(CALL) do {                                                                                   \
        if (size == 4 && shift == 2) {                                                                          \
            if (count == 1) return CALL(1, 4, 2);                                                               \
            if (count == 2) return CALL(2, 4, 2);                                                               \
            if (count == 4) return CALL(4, 4, 2);                                                               \
        }                                                                                                       \
        if (shift == 0) {                                                                                       \
            if (count == 1 && size == 2) return CALL(1, 2, 0);                                                  \
            if (count == 1 && size == 1) return CALL(1, 1, 0);                                                  \
            if (count == 1 && size == 4) return CALL(1, 4, 0);                                                  \
            if (count == 4 && size == 4) return CALL(4, 4, 0);                                                  \
        }                                                                                                       \
        return CALL(count, size, shift);                                                                        \
    } while (0)

int64_t lnbench_buf_load(const uint8_t *data, int64_t rbase, int64_t *addr, int64_t n, const uint8_t *written,
                         const int32_t *modifier, int32_t *reader, int shift, const int64_t *wave_group,
                         uint8_t *touched, uint32_t *R, int64_t row_len, int64_t dst, int64_t count, int64_t size,
                         int sign) {
#define BUF_LOAD(C, S, SH) buf_load(data, rbase, addr, n, written, modifier, reader, SH, wave_group, touched, R, \
                                    row_len, dst, C, S, sign)
    BUF_SHAPES(BUF_LOAD);
#undef BUF_LOAD
}

/* A load whose lanes have every component in range or none (valid, from lnbench_buf_addrs), as the handler's
 * component loop does it: component by component (each a load of `size` bytes by the valid lanes, in lane order:
 * initcheck, the race test, the readers' note, the data, the touched map), the other lanes' registers 0. Every
 * component's tests run before anything changes (a load changes nothing they read): 1 for a finding, nothing changed.
 * data may be NULL when no lane is valid. */
int64_t lnbench_buf_load_lanes(const uint8_t *data, int64_t rbase, const int64_t *addr, const uint8_t *valid,
                               int64_t n, const uint8_t *written, const int32_t *modifier, int32_t *reader, int shift,
                               const int64_t *wave_group, uint8_t *touched, uint32_t *R, int64_t row_len, int64_t dst,
                               int64_t count, int64_t size, int sign) {
    int64_t *offs = scratch(5, (size_t)n * sizeof(int64_t) + 1), *at = scratch(6, (size_t)n * sizeof(int64_t) + 1);
    int64_t *unit = scratch(8, (size_t)n * sizeof(int64_t) + 1), *lane = scratch(4, (size_t)n * sizeof(int64_t) + 1);
    int32_t *g = scratch(3, (size_t)n * sizeof(int32_t) + 1);
    if (!offs || !at || !unit || !lane || !g) return -2;
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (valid[i]) {
            offs[m] = addr[i] - rbase;
            g[m] = (int32_t)wave_group[i / 64];
            lane[m++] = i;
        }
    const int64_t per = size >> shift;
    for (int64_t j = 0; j < count; j++) {
        for (int64_t k = 0; k < m; k++) {
            at[k] = offs[k] + j * size;
            unit[k] = at[k] >> shift;
        }
        if (written && first_unset(written, at, m, size) >= 0) return 1;
        if (reader && modifier && race_modified(modifier, unit, m, g, 0, per) >= 0) return 1;
    }
    for (int64_t j = 0; j < count; j++) {
        uint32_t *out = R + (dst + j) * row_len;
        for (int64_t k = 0; k < m; k++) {
            at[k] = offs[k] + j * size;
            unit[k] = at[k] >> shift;
        }
        if (reader && race_note(reader, unit, m, g, 0, per) == -2) return -2;
        if (size == 4)
            for (int64_t k = 0; k < m; k++) memcpy(out + lane[k], data + at[k], 4);
        else
            for (int64_t k = 0; k < m; k++) out[lane[k]] = widened(data + at[k], size, sign);
        if (touched)
            for (int64_t k = 0; k < m; k++) set_access(touched + at[k], size);
    }
    for (int64_t i = 0; i < n; i++)
        if (!valid[i])
            for (int64_t j = 0; j < count; j++) R[(dst + j) * row_len + i] = 0;
    return 0;
}

/* A store of `count` components of `size` bytes (the low bytes of each register) from register rows src, src+1, ...
 * modifier: the race shadow's (NULL: race checker off), tested only when `modified`; reader: NULL when nothing read
 * the buffer. Returns 0; 1 for a finding before any change; 2 for two workgroups of this access storing one byte
 * (found[0]: its lane * nbytes + byte, the modifiers updated); -2 when out of memory. */
static inline __attribute__((always_inline)) int64_t buf_store(uint8_t *data, int64_t rbase, int64_t *addr,
        int64_t n, uint8_t *written, int32_t *modifier, int modified, const int32_t *reader, const int shift,
        const int64_t *wave_group, uint8_t *touched, const uint32_t *R, int64_t row_len, int64_t src,
        const int64_t count, const int64_t size, int64_t *found) {
    const int64_t nbytes = count * size, per = nbytes >> shift;
    int32_t *g = modifier ? scratch(3, (size_t)n * sizeof(int32_t) + 1) : NULL;
    int64_t *unit = modifier ? scratch(4, (size_t)n * sizeof(int64_t) + 1) : NULL;
    if (modifier && (!g || !unit)) return -2;
    buf_lanes(addr, n, rbase, wave_group, shift, g, unit);
    if (modifier) {
        if (modified && race_modified(modifier, unit, n, g, 0, per) >= 0) return 1;
        if (reader && race_read(reader, unit, n, g, per) >= 0) return 1;
        const int64_t clash = race_store(modifier, unit, n, g, per);
        if (clash >= 0) {
            found[0] = clash;
            return 2;
        }
    }
    const uint32_t *in = R + src * row_len;
    if (size == 4)
        for (int64_t i = 0; i < n; i++)      /* lane order: of two lanes storing one byte, the later wins */
            for (int64_t j = 0; j < count; j++) memcpy(data + addr[i] + 4 * j, in + j * row_len + i, 4);
    else
        for (int64_t i = 0; i < n; i++) memcpy(data + addr[i], in + i, (size_t)size);    /* little-endian low bytes */
    if (written)
        for (int64_t i = 0; i < n; i++) set_access(written + addr[i], nbytes);
    if (touched)
        for (int64_t i = 0; i < n; i++) set_access(touched + addr[i], nbytes);
    return 0;
}

int64_t lnbench_buf_store(uint8_t *data, int64_t rbase, int64_t *addr, int64_t n, uint8_t *written,
                          int32_t *modifier, int modified, const int32_t *reader, int shift, const int64_t *wave_group,
                          uint8_t *touched, const uint32_t *R, int64_t row_len, int64_t src, int64_t count,
                          int64_t size, int64_t *found) {
#define BUF_STORE(C, S, SH) buf_store(data, rbase, addr, n, written, modifier, modified, reader, SH, wave_group, \
                                      touched, R, row_len, src, C, S, found)
    BUF_SHAPES(BUF_STORE);
#undef BUF_STORE
}

/* v_perm_b32: byte k of the result is byte (sel >> 8k) & 0xFF of {s1 bytes 0-3, s0 bytes 4-7, the sign of s1's low and
 * high half, of s0's low and high half spread to a byte (8-11), 0 (12), 0xFF (13 and up)} */
static inline uint32_t perm_lane(uint32_t a, uint32_t b, uint32_t sel) {
    const uint64_t bytes = ((uint64_t)a << 32) | b;
    uint32_t r = 0;
    for (int k = 0; k < 4; k++) {
        const uint32_t s = (sel >> (8 * k)) & 0xFF;
        uint32_t byte;
        if (s < 8) byte = (uint32_t)(bytes >> (8 * s)) & 0xFF;
        else if (s < 12) byte = (((s < 10 ? b : a) >> ((s & 1) ? 31 : 15)) & 1) ? 0xFF : 0;
        else byte = s == 12 ? 0 : 0xFF;
        r |= byte << (8 * k);
    }
    return r;
}

void lnbench_perm_b32(const uint32_t *s0, const uint32_t *s1, const uint32_t *s2, int64_t n, uint32_t *out) {
    for (int64_t i = 0; i < n; i++) out[i] = perm_lane(s0[i], s1[i], s2[i]);
}

/* v_perm_b32 on operands of different shapes (fastpath.py): lane i of operand k is sk[i >> shk] (shift 0: one value
 * per lane, 6: one per wave of 64 lanes, 63: one in all). out may be an operand: lane i is read before it is written. */
void lnbench_perm_b32_lanes(const uint32_t *s0, int sh0, const uint32_t *s1, int sh1, const uint32_t *s2, int sh2,
                            int64_t n, uint32_t *out) {
    for (int64_t i = 0; i < n; i++) out[i] = perm_lane(s0[i >> sh0], s1[i >> sh1], s2[i >> sh2]);
}

/* a*b+c rounded once to float32 over n lanes, the algorithm of ops_vector.fma_f32 step by step in double: the exact
 * product, the rounded sum s and its two-sum error t, s rounded to odd (an inexact s with an even last bit moves one
 * ulp toward t), then rounded to float32. Returns how many results are NaN: their payloads depend on the operand
 * order of each operation, so the caller computes those arrays with numpy instead. */
static inline __attribute__((always_inline)) int64_t fma_lanes(const float *a, const float *b, const float *c,
                                                                 int64_t n, float *out) {
    int64_t nans = 0;
    for (int64_t i = 0; i < n; i++) {
        const double p = (double)a[i] * (double)b[i], cc = (double)c[i];
        const double s = p + cc;
        const double bb = s - p;
        const double t = (p - (s - bb)) + (cc - bb);
        int64_t bits, tbits;
        memcpy(&bits, &s, 8);
        memcpy(&tbits, &t, 8);
        if (fabs(t) > 0 && (bits & 1) == 0) bits += ((tbits ^ bits) < 0) ? -1 : 1;
        double odd;
        memcpy(&odd, &bits, 8);
        const float r = (float)odd;
        nans += r != r;
        out[i] = r;
    }
    return nans;
}

/* The same loop built for AVX2 (4 lanes a time, the same IEEE double operations without contraction, so the same
 * bits) and for the x86-64 baseline, picked on the first call (the compiler's target_clones dispatch picked the
 * baseline in this library whatever the CPU). */
__attribute__((target("avx2"))) static int64_t fma_avx2(const float *a, const float *b, const float *c, int64_t n,
                                                         float *out) {
    return fma_lanes(a, b, c, n, out);
}

static int64_t fma_baseline(const float *a, const float *b, const float *c, int64_t n, float *out) {
    return fma_lanes(a, b, c, n, out);
}

/* AVX2 present and its registers enabled by the OS (CPUID and XGETBV; the compiler's __builtin_cpu_supports reads a
 * CPU model that is never filled in here) */
static int has_avx2(void) {
    unsigned a, b, c, d, lo, hi;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX)) return 0;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 6) != 6) return 0;                                  /* XMM and YMM state */
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX2);
}

int64_t lnbench_fma_f32(const float *a, const float *b, const float *c, int64_t n, float *out) {
    static int avx2 = -1;
    if (avx2 < 0) avx2 = has_avx2();
    return avx2 ? fma_avx2(a, b, c, n, out) : fma_baseline(a, b, c, n, out);
}

/* The fused multiply-adds of one v_fma_f32 or v_pk_fma_f32 on whole rows of the register file (fastpath.py): for each
 * half h < halves, row rows[4h+3] = fma(row rows[4h], row rows[4h+1], row rows[4h+2]) over the n floats of a row
 * (R: the register file, row r at R + r*n). Every half is computed into scratch (halves * n floats) before any row is
 * written, as the handler reads every source first. Returns 0 when written; else the NaN count, nothing written. */
int64_t lnbench_fma_rows(float *R, int64_t n, const int64_t *rows, int64_t halves, float *scratch) {
    static int avx2 = -1;
    if (avx2 < 0) avx2 = has_avx2();
    int64_t nans = 0;
    for (int64_t h = 0; h < halves; h++) {
        const float *a = R + rows[4 * h] * n, *b = R + rows[4 * h + 1] * n, *c = R + rows[4 * h + 2] * n;
        nans += avx2 ? fma_avx2(a, b, c, n, scratch + h * n) : fma_baseline(a, b, c, n, scratch + h * n);
    }
    if (nans) return nans;
    for (int64_t h = 0; h < halves; h++) memcpy(R + rows[4 * h + 3] * n, scratch + h * n, (size_t)n * sizeof(float));
    return 0;
}

/* ---------------------------------------------------------------- LDS (ops_memory.py, lds_banks.py) */

#define LDS_SEVERAL_READERS 0xFFFFFFFFLL

/* The LDS race checker of one ds_read/ds_write (ops_memory._race_check_and_mark states the rules) over n accesses of
 * `parts` parts of `ndw` dwords: access i, part p, dword q is LDS dword addrs[i*parts+p]/4 + q of workgroup
 * groups[i], entry j = p*ndw + q of the access. wkey/rkey: the flattened (n_groups, n_dw) last-writer and last-reader
 * keys (epoch << 32 | wave); lds: the n_groups workgroups' LDS bytes (lds_bytes each); wave: the batch wave of each
 * access, epoch/wave_id: per batch wave. values: a write's (n, parts*ndw) dwords (NULL for a read). Every test reads
 * the state from before the access; updates are applied in access order (the later one wins), as numpy's fancy
 * assignment did. A finding stops at once and comes back as the lowest i * m + j (m = parts*ndw); info[0] says which:
 * 1 a read of a dword another wave wrote, 2 a write that changes a dword another wave wrote (info[2] = 1) or read, 3
 * two waves of this step writing different values; info[1] the other key, info[3] the value written, info[4] the one
 * held (3: the one that won). info[5]: the benign writes (racing, but storing the value already held). Returns -1 or
 * the index, -2 when out of memory. */
static inline __attribute__((always_inline)) int64_t lds_race(int64_t *wkey, int64_t *rkey, uint8_t *lds,
        int64_t n_groups, int64_t n_dw, int64_t lds_bytes, const int64_t *addrs, const int64_t *groups,
        const int64_t *wave, const int64_t *epoch, const int64_t *wave_id, int64_t n, const int64_t parts,
        const int64_t ndw, const uint32_t *values, int64_t *info) {
    const int64_t m = parts * ndw;
    memset(info, 0, 6 * sizeof(int64_t));
    int64_t *key = scratch(0, (size_t)(n * m) * sizeof(int64_t) + 1);    /* flat key index of each entry */
    int64_t *own = scratch(2, (size_t)n * sizeof(int64_t) + 1);           /* the key of each access's wave */
    if (!key || !own) return -2;
    int distinct = 1;                    /* keys rising in access order: no dword twice, updates may go in place */
    int64_t last = -1;
    for (int64_t i = 0; i < n; i++) {
        own[i] = (epoch[wave[i]] << 32) | wave_id[wave[i]];
        for (int64_t p = 0; p < parts; p++)
            for (int64_t q = 0; q < ndw; q++) {
                const int64_t k = groups[i] * n_dw + addrs[i * parts + p] / 4 + q;
                key[i * m + p * ndw + q] = k;
                distinct &= k > last;
                last = k;
            }
    }
    int64_t found = -1;
    if (!values) {                                                   /* a read */
        for (int64_t i = 0; i < n && found < 0; i++) {
            const int64_t mine = own[i], lo = mine & ~(int64_t)0xFFFFFFFF;   /* wave ids < 2^32 */
            for (int64_t j = 0; j < m; j++) {
                const int64_t lw = wkey[key[i * m + j]];
                if (lw >= lo && lw != mine) { found = i * m + j; info[0] = 1; info[1] = lw; break; }
            }
        }
        if (found < 0 && distinct) {     /* each dword's state read just before its one update */
            for (int64_t i = 0; i < n; i++) {
                const int64_t mine = own[i], lo = mine & ~(int64_t)0xFFFFFFFF;   /* wave ids < 2^32 */
                for (int64_t j = 0; j < m; j++) {
                    const int64_t prev = rkey[key[i * m + j]];
                    rkey[key[i * m + j]] = (prev >= lo && prev != mine) ? (lo | LDS_SEVERAL_READERS) : mine;
                }
            }
        } else if (found < 0) {
            int64_t *next = scratch(1, (size_t)(n * m) * sizeof(int64_t) + 1);
            if (!next) return -2;
            for (int64_t i = 0; i < n; i++) {
                const int64_t mine = own[i], lo = mine & ~(int64_t)0xFFFFFFFF;   /* wave ids < 2^32 */
                for (int64_t j = 0; j < m; j++) {
                    const int64_t prev = rkey[key[i * m + j]];
                    next[i * m + j] = (prev >= lo && prev != mine) ? (lo | LDS_SEVERAL_READERS) : mine;
                }
            }
            for (int64_t e = 0; e < n * m; e++) rkey[key[e]] = next[e];
        }
        return found;
    }
    int64_t benign = 0;                                              /* a write: the clash test, then the keys */
    for (int64_t i = 0; i < n && found < 0; i++) {
        const int64_t mine = own[i], lo = mine & ~(int64_t)0xFFFFFFFF;   /* wave ids < 2^32 */
        for (int64_t j = 0; j < m; j++) {
            const int64_t g = groups[i], d = key[i * m + j] - g * n_dw;
            const int64_t lw = wkey[key[i * m + j]], lr = rkey[key[i * m + j]];
            const int other_w = lw >= lo && lw != mine, other_r = lr >= lo && lr != mine;
            if (!(other_w || other_r)) continue;
            uint32_t held;
            memcpy(&held, lds + g * lds_bytes + 4 * d, 4);
            if (values[i * m + j] != held) {
                found = i * m + j;
                info[0] = 2; info[1] = other_w ? lw : lr; info[2] = other_w; info[3] = values[i * m + j]; info[4] = held;
                break;
            }
            benign++;
        }
    }
    if (found >= 0) return found;
    for (int64_t i = 0; i < n; i++) {
        const int64_t mine = own[i];
        for (int64_t j = 0; j < m; j++) wkey[key[i * m + j]] = mine;
    }
    int64_t dups = 0;                                                /* two waves of this step on one dword */
    for (int64_t i = 0; i < n && !dups && !distinct; i++) {
        const int64_t mine = own[i];
        for (int64_t j = 0; j < m; j++) if (wkey[key[i * m + j]] != mine) { dups = 1; break; }
    }
    if (dups) {
        /* the values that won. LDS of whole dwords: store them now (ds_write stores its data again after, as the numpy
         * checker did); else in a scratch map of the dwords (the LDS bytes untouched) */
        const int whole = lds_bytes % 4 == 0;
        uint32_t *won_map = whole ? (uint32_t *)lds : scratch(1, (size_t)(n_groups * n_dw) * sizeof(uint32_t) + 1);
        if (!won_map) return -2;
        dups = 0;
        for (int64_t e = 0; e < n * m; e++) won_map[key[e]] = values[e];
        for (int64_t i = 0; i < n && found < 0; i++) {
            const int64_t mine = own[i];
            for (int64_t j = 0; j < m; j++) {
                const int64_t winner = wkey[key[i * m + j]];
                if (winner == mine) continue;
                const uint32_t won = won_map[key[i * m + j]];
                if (won != values[i * m + j]) {
                    found = i * m + j;
                    info[0] = 3; info[1] = winner; info[3] = values[i * m + j]; info[4] = won;
                    break;
                }
                dups++;
            }
        }
    }
    info[5] = benign + dups;
    return found;
}

int64_t lnbench_lds_race(int64_t *wkey, int64_t *rkey, uint8_t *lds, int64_t n_groups, int64_t n_dw,
                         int64_t lds_bytes, const int64_t *addrs, const int64_t *groups, const int64_t *wave,
                         const int64_t *epoch, const int64_t *wave_id, int64_t n, int64_t parts, int64_t ndw,
                         const uint32_t *values, int64_t *info) {
#define LDS_RACE(P, D) lds_race(wkey, rkey, lds, n_groups, n_dw, lds_bytes, addrs, groups, wave, epoch, wave_id, n, \
                                P, D, values, info)
    /* the usual shapes with constant loop bounds (ds_read/write_b32, b64, b128 and their read2/write2 forms) */
    if (parts == 1 && ndw == 1) return LDS_RACE(1, 1);
    if (parts == 2 && ndw == 1) return LDS_RACE(2, 1);
    if (parts == 1 && ndw == 2) return LDS_RACE(1, 2);
    if (parts == 1 && ndw == 4) return LDS_RACE(1, 4);
    if (parts == 2 && ndw == 2) return LDS_RACE(2, 2);
    return LDS_RACE(parts, ndw);
#undef LDS_RACE
}

/* One dword of a pass in the bank model: added to its bank's list of distinct dwords (seen: 32 lists of depth_max,
 * depth: their lengths) unless there already; *degree: the longest list. */
static inline void bank_note(int64_t *seen, int64_t *depth, int64_t depth_max, int64_t d, int64_t *degree) {
    const int64_t bank = d & 31;
    int64_t *list = seen + bank * depth_max, c = 0;
    while (c < depth[bank] && list[c] != d) c++;
    if (c == depth[bank]) {
        list[depth[bank]++] = d;
        if (depth[bank] > *degree) *degree = depth[bank];
    }
}

/* The LDS bank model of one ds_read/ds_write over the k waves of a step (lds_banks.py states it): access i is lane
 * lanes[i] of step row rows[i], `parts` parts of `count` dwords from byte address addrs[i*parts+p]. Per wave and pass
 * of lanes_per_pass lanes: the most distinct dwords one bank holds. out[0]: clocks, out[1]: passes with an active
 * lane. Returns 0, or -2 when out of memory. */
static inline __attribute__((always_inline)) int64_t lds_banks(const int64_t *rows, const int64_t *lanes,
        const int64_t *addrs, int64_t n, const int64_t parts, const int64_t count, int64_t k, const int64_t lanes_per_pass,
        int64_t *out) {
    const int64_t per_lane = parts * count, width = 64 * per_lane;
    int64_t *pattern = scratch(0, (size_t)(k * width) * sizeof(int64_t) + 1);
    int64_t *seen = scratch(1, (size_t)(32 * lanes_per_pass * per_lane) * sizeof(int64_t) + 1);
    if (!pattern || !seen) return -2;
    for (int64_t e = 0; e < k * width; e++) pattern[e] = -1;
    for (int64_t i = 0; i < n; i++)
        for (int64_t p = 0; p < parts; p++)
            for (int64_t q = 0; q < count; q++)
                pattern[rows[i] * width + lanes[i] * per_lane + p * count + q] = addrs[i * parts + p] / 4 + q;
    const int64_t depth_max = lanes_per_pass * per_lane;   /* entries of a pass: at most that many dwords per bank */
    int64_t busy = 0, active = 0;
    for (int64_t r = 0; r < k; r++)
        for (int64_t first = 0; first < 64; first += lanes_per_pass) {
            int64_t depth[32] = {0}, degree = 0;
            const int64_t *pass = pattern + r * width + first * per_lane;
            for (int64_t e = 0; e < lanes_per_pass * per_lane; e++)
                if (pass[e] >= 0) bank_note(seen, depth, depth_max, pass[e], &degree);
            busy += degree;
            active += degree > 0;
        }
    out[0] = busy;
    out[1] = active;
    return 0;
}

int64_t lnbench_lds_banks(const int64_t *rows, const int64_t *lanes, const int64_t *addrs, int64_t n, int64_t parts,
                          int64_t count, int64_t k, int64_t lanes_per_pass, int64_t *out) {
    /* the usual shapes with constant loop bounds: 1, 2 or 4 dwords a lane (32, 16, 8 lanes a pass) */
    if (parts == 1 && count == 1 && lanes_per_pass == 32) return lds_banks(rows, lanes, addrs, n, 1, 1, k, 32, out);
    if (parts == 2 && count == 1 && lanes_per_pass == 16) return lds_banks(rows, lanes, addrs, n, 2, 1, k, 16, out);
    if (parts == 1 && count == 2 && lanes_per_pass == 16) return lds_banks(rows, lanes, addrs, n, 1, 2, k, 16, out);
    if (parts == 1 && count == 4 && lanes_per_pass == 8) return lds_banks(rows, lanes, addrs, n, 1, 4, k, 8, out);
    return lds_banks(rows, lanes, addrs, n, parts, count, k, lanes_per_pass, out);
}

/* LDS data movement and initcheck of one ds_read/ds_write: access i, part p covers `nbytes` bytes from byte address
 * addrs[i*parts+p] of workgroup groups[i]'s LDS (lds_bytes each). */

/* ds_write: part by part, lane by lane (the later lane wins, part 1 after part 0), data[i*parts+p] holding nbytes */
void lnbench_lds_store(uint8_t *lds, int64_t lds_bytes, const int64_t *addrs, const int64_t *groups, int64_t n,
                       int64_t parts, int64_t nbytes, const uint8_t *data) {
    for (int64_t p = 0; p < parts; p++)
        for (int64_t i = 0; i < n; i++)
            copy_access(lds + groups[i] * lds_bytes + addrs[i * parts + p], data + (i * parts + p) * nbytes, nbytes);
}

/* ds_read: out[i*parts+p] = the nbytes at the access */
void lnbench_lds_load(const uint8_t *lds, int64_t lds_bytes, const int64_t *addrs, const int64_t *groups, int64_t n,
                      int64_t parts, int64_t nbytes, uint8_t *out) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t p = 0; p < parts; p++)
            copy_access(out + (i * parts + p) * nbytes, lds + groups[i] * lds_bytes + addrs[i * parts + p], nbytes);
}

/* LDS initcheck: a write sets the written flag of every byte it covers; a read returns the first (i, p, byte) whose
 * flag is 0, as i * parts * nbytes + p * nbytes + byte, or -1 */
static inline __attribute__((always_inline)) int64_t lds_written(uint8_t *written, int64_t lds_bytes,
        const int64_t *addrs, const int64_t *groups, int64_t n, const int64_t parts, const int64_t nbytes, int write) {
    if (write) {
        for (int64_t i = 0; i < n; i++)
            for (int64_t p = 0; p < parts; p++) set_access(written + groups[i] * lds_bytes + addrs[i * parts + p], nbytes);
        return -1;
    }
    for (int64_t i = 0; i < n; i++)
        for (int64_t p = 0; p < parts; p++) {
            const uint8_t *at = written + groups[i] * lds_bytes + addrs[i * parts + p];
            int unset = 0;
            for (int64_t b = 0; b < nbytes; b++) unset |= !at[b];
            if (unset)
                for (int64_t b = 0; b < nbytes; b++)
                    if (!at[b]) return (i * parts + p) * nbytes + b;
        }
    return -1;
}

int64_t lnbench_lds_written(uint8_t *written, int64_t lds_bytes, const int64_t *addrs, const int64_t *groups,
                            int64_t n, int64_t parts, int64_t nbytes, int write) {
    /* the usual shapes with constant loop bounds: one or two parts of 4, 8 or 16 bytes */
    if (parts == 1 && nbytes == 4) return lds_written(written, lds_bytes, addrs, groups, n, 1, 4, write);
    if (parts == 2 && nbytes == 4) return lds_written(written, lds_bytes, addrs, groups, n, 2, 4, write);
    if (parts == 1 && nbytes == 8) return lds_written(written, lds_bytes, addrs, groups, n, 1, 8, write);
    if (parts == 2 && nbytes == 8) return lds_written(written, lds_bytes, addrs, groups, n, 2, 8, write);
    if (parts == 1 && nbytes == 16) return lds_written(written, lds_bytes, addrs, groups, n, 1, 16, write);
    return lds_written(written, lds_bytes, addrs, groups, n, parts, nbytes, write);
}

/* lds_banks for every lane of n_waves waves, access i = lane i % 64 of wave i / 64 (lnbench_lds_rows): the same
 * clocks and passes. A pass whose dwords fall in distinct banks (the usual pattern: one dword a bank) costs one clock;
 * only a pass where two of its dwords share a bank counts the distinct dwords per bank (lds_banks' way). */
static inline __attribute__((always_inline)) int64_t lds_banks_full(const int64_t *addrs, int64_t n_waves,
        const int64_t parts, const int64_t count, const int64_t lanes_per_pass, int64_t *out) {
    const int64_t per_lane = parts * count, depth_max = lanes_per_pass * per_lane;
    int64_t *seen = scratch(1, (size_t)(32 * depth_max) * sizeof(int64_t) + 1);
    if (!seen) return -2;
    int64_t busy = 0, active = 0;
    for (int64_t w = 0; w < n_waves; w++)
        for (int64_t first = 0; first < 64; first += lanes_per_pass) {
            const int64_t *a = addrs + (w * 64 + first) * parts;
            uint32_t banks = 0;
            int shared = 0;
            for (int64_t l = 0; l < lanes_per_pass; l++)
                for (int64_t p = 0; p < parts; p++)
                    for (int64_t q = 0; q < count; q++) {
                        const uint32_t bit = 1u << ((a[l * parts + p] / 4 + q) & 31);
                        shared |= (banks & bit) != 0;
                        banks |= bit;
                    }
            int64_t degree = 1;
            if (shared) {                  /* lds_banks' count: the most distinct dwords one bank holds */
                int64_t depth[32] = {0};
                degree = 0;
                for (int64_t l = 0; l < lanes_per_pass; l++)
                    for (int64_t p = 0; p < parts; p++)
                        for (int64_t q = 0; q < count; q++) bank_note(seen, depth, depth_max, a[l * parts + p] / 4 + q,
                                                                      &degree);
            }
            busy += degree;
            active += degree > 0;
        }
    out[0] = busy;
    out[1] = active;
    return 0;
}

static int64_t banks_full(const int64_t *addrs, int64_t n_waves, int64_t parts, int64_t count,
                          int64_t lanes_per_pass, int64_t *out) {
    if (parts == 1 && count == 1 && lanes_per_pass == 32) return lds_banks_full(addrs, n_waves, 1, 1, 32, out);
    if (parts == 2 && count == 1 && lanes_per_pass == 16) return lds_banks_full(addrs, n_waves, 2, 1, 16, out);
    if (parts == 1 && count == 2 && lanes_per_pass == 16) return lds_banks_full(addrs, n_waves, 1, 2, 16, out);
    if (parts == 1 && count == 4 && lanes_per_pass == 8) return lds_banks_full(addrs, n_waves, 1, 4, 8, out);
    return lds_banks_full(addrs, n_waves, parts, count, lanes_per_pass, out);
}

/* A ds_read/ds_write of every lane of every wave of a batch (fastpath_lds.py), in one call: what ops_memory's handler
 * does with the helpers above, in its order. Lane i (wave i / 64) addresses `parts` parts of `ndw` dwords from byte
 * R[addr_row][i] + offset[p] of its workgroup's LDS (group[wave]); a write stores rows data[p] .. data[p] + ndw - 1, a
 * read loads into rows dst, dst + 1, ... (part by part). race: the LDS race checker on; written: initcheck's map (NULL:
 * off). Returns 0 done; 1 an access outside the LDS allocation (nothing changed: the handler reports it); 2 a race
 * finding (found[0] and info as lnbench_lds_race gives them); 3 an uninitialized read (found[0] as lnbench_lds_written
 * gives it); -2 out of memory. out[0], out[1]: the bank model's clocks and active passes. */
int64_t lnbench_lds_rows(uint32_t *R, int64_t row_len, int64_t n_waves, int64_t addr_row, const int64_t *offset,
                         int64_t parts, int64_t ndw, int write, const int64_t *data, int64_t dst,
                         const int64_t *group, const int64_t *epoch, const int64_t *wave_id, uint8_t *lds,
                         int64_t n_groups, int64_t lds_bytes, int64_t *wkey, int64_t *rkey, int race,
                         uint8_t *written, int64_t lanes_per_pass, int64_t *found, int64_t *info, int64_t *out) {
    const int64_t n = n_waves * 64, m = parts * ndw, n_dw = (lds_bytes + 3) / 4;
    int64_t *addrs = scratch(5, (size_t)(n * parts) * sizeof(int64_t) + 1);
    int64_t *groups = scratch(6, (size_t)n * sizeof(int64_t) + 1);
    int64_t *wave = scratch(7, (size_t)n * sizeof(int64_t) + 1);           /* the wave of each access */
    uint32_t *values = write ? scratch(8, (size_t)(n * m) * sizeof(uint32_t) + 1) : NULL;
    if (!addrs || !groups || !wave || (write && !values)) return -2;
    const uint32_t *base = R + addr_row * row_len;
    int inside = 1;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t p = 0; p < parts; p++) {
            const int64_t a = (int64_t)base[i] + offset[p];
            addrs[i * parts + p] = a;
            inside &= (a >= 0) & (a + 4 * ndw <= lds_bytes);
        }
        wave[i] = i / 64;
        groups[i] = group[i / 64];
    }
    if (!inside) return 1;
    if (write)
        for (int64_t p = 0; p < parts; p++)
            for (int64_t q = 0; q < ndw; q++) {
                const uint32_t *row = R + (data[p] + q) * row_len;
                for (int64_t i = 0; i < n; i++) values[i * m + p * ndw + q] = row[i];
            }
    if (race) {
        const int64_t f = lnbench_lds_race(wkey, rkey, lds, n_groups, n_dw, lds_bytes, addrs, groups, wave, epoch,
                                           wave_id, n, parts, ndw, values, info);
        if (f == -2) return -2;
        if (f >= 0) {
            found[0] = f;
            return 2;
        }
    }
    if (written) {
        const int64_t f = lnbench_lds_written(written, lds_bytes, addrs, groups, n, parts, 4 * ndw, write);
        if (f >= 0) {
            found[0] = f;
            return 3;
        }
    }
    if (write)
        lnbench_lds_store(lds, lds_bytes, addrs, groups, n, parts, 4 * ndw, (const uint8_t *)values);
    else
        for (int64_t p = 0; p < parts; p++)
            for (int64_t q = 0; q < ndw; q++) {
                uint32_t *row = R + (dst + p * ndw + q) * row_len;
                for (int64_t i = 0; i < n; i++) memcpy(row + i, lds + groups[i] * lds_bytes + addrs[i * parts + p] + 4 * q, 4);
            }
    return banks_full(addrs, n_waves, parts, ndw, lanes_per_pass, out);
}

/* Cross-lane moves of every wave of a batch (fastpath.py), rows of R (row_len lanes, 64 a wave): ds_swizzle_b32 reads
 * lane source[l] of its wave's src row into lane l of dst; ds_bpermute_b32 reads lane ((addr + offset) / 4) % 64 of its
 * wave's data row. Each wave's result is made whole before it is written (dst may be a source). */
void lnbench_swizzle_rows(uint32_t *R, int64_t row_len, int64_t n_waves, int64_t src, int64_t dst,
                          const int64_t *source) {
    const uint32_t *in = R + src * row_len;
    uint32_t *out = R + dst * row_len, wave[64];
    for (int64_t w = 0; w < n_waves; w++) {
        for (int64_t l = 0; l < 64; l++) wave[l] = in[w * 64 + source[l]];
        memcpy(out + w * 64, wave, sizeof wave);
    }
}

void lnbench_bpermute_rows(uint32_t *R, int64_t row_len, int64_t n_waves, int64_t addr, int64_t data, int64_t dst,
                           int64_t offset) {
    const uint32_t *a = R + addr * row_len, *d = R + data * row_len;
    uint32_t *out = R + dst * row_len, wave[64];
    for (int64_t w = 0; w < n_waves; w++) {
        for (int64_t l = 0; l < 64; l++) wave[l] = d[w * 64 + (((int64_t)a[w * 64 + l] + offset) / 4) % 64];
        memcpy(out + w * 64, wave, sizeof wave);
    }
}

/* The wait-count checker's bookkeeping for a step of every wave of the batch (hazards.py says what each does; these
 * are its numpy steps for that case, in C). issued, done: (n, 3) per kind; score, pc: (n, regs), kind: (n, regs) int8;
 * maybe: regs flags; newest: (regs, 3). */

/* An issued memory operation of kind k loading registers loads[0..nloads) (lds_store: an LDS store). */
void lnbench_wc_issue(int64_t n, int64_t regs, int64_t *issued, int64_t *score, int8_t *kind, int64_t *pc,
                      uint8_t *maybe, int64_t *newest, int64_t *lds_store, int64_t *lds_store_pc, const int64_t *loads,
                      int64_t nloads, int64_t k, int64_t ins_pc, int is_lds_store) {
    int64_t top = INT64_MIN;
    for (int64_t w = 0; w < n; w++) {
        const int64_t number = ++issued[w * 3 + k];
        top = number > top ? number : top;
        for (int64_t j = 0; j < nloads; j++) {
            const int64_t r = loads[j];
            score[w * regs + r] = number;
            kind[w * regs + r] = (int8_t)k;
            pc[w * regs + r] = ins_pc;
        }
        if (is_lds_store) {
            lds_store[w] = issued[w * 3 + 1];
            lds_store_pc[w] = ins_pc;
        }
    }
    if (nloads)
        for (int64_t j = 0; j < nloads; j++) {
            const int64_t r = loads[j];
            maybe[r] = 1;
            if (top > newest[r * 3 + k]) newest[r * 3 + k] = top;
        }
}

/* s_waitcnt vmcnt(vm) lgkmcnt(lgkm): returns bit 0 when some operation of some wave is still outstanding, bit 1 when
 * `maybe` changed (narrowed while some register may be pending: any_maybe). */
int64_t lnbench_wc_wait(int64_t n, int64_t regs, const int64_t *issued, int64_t *done, int64_t vm, int64_t lgkm,
                        uint8_t *maybe, const int64_t *newest, int any_maybe) {
    int live = 0;
    int64_t low[3] = {INT64_MAX, INT64_MAX, INT64_MAX};
    for (int64_t w = 0; w < n; w++) {
        int64_t *d = done + w * 3;
        const int64_t *s = issued + w * 3;
        if (s[0] - vm > d[0]) d[0] = s[0] - vm;
        if (s[1] - lgkm > d[1]) d[1] = s[1] - lgkm;
        if (lgkm == 0) d[2] = s[2];
        for (int q = 0; q < 3; q++) {
            live |= s[q] > d[q];
            if (d[q] < low[q]) low[q] = d[q];
        }
    }
    if (!any_maybe) return live;
    int changed = 0;
    for (int64_t r = 0; r < regs; r++) {
        const uint8_t keep = live && (newest[r * 3] > low[0] || newest[r * 3 + 1] > low[1] || newest[r * 3 + 2] > low[2]);
        const uint8_t now = maybe[r] && keep;
        changed |= now != maybe[r];
        maybe[r] = now;
    }
    return live | (changed << 1);
}

/* Some wave uses one of the registers regs_used[0..m) (those `maybe` flags) while an operation not known complete
 * will still write it (same_kind: a load of that in-order kind, which lands after it, is no hazard; -1 none).
 * Returns 1 when so (the caller reports it), else 0. */
int64_t lnbench_wc_pending(int64_t n, int64_t regs, const int64_t *score, const int8_t *kind, const int64_t *done,
                           const uint8_t *maybe, const int64_t *regs_used, int64_t m, int64_t same_kind) {
    for (int64_t w = 0; w < n; w++)
        for (int64_t j = 0; j < m; j++) {
            const int64_t r = regs_used[j];
            if (!maybe[r]) continue;
            const int64_t k = kind[w * regs + r];
            if (score[w * regs + r] > done[w * 3 + k] && k != same_kind) return 1;
        }
    return 0;
}
