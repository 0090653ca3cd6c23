/* A Qwen3 decode step at batch 4 on a CPU, as plain loops the compiler vectorises for the machine
 * it runs on (built by native_kernels.py with -O3 -march=native). Two kernels do all of a layer:
 *
 *   skinny_matmul     y (+)= f(x) @ w^T for a few rows x, f an RMSNorm or a SiLU gate or nothing:
 *                     each weight row is read once, for every row
 *   decode_attention  per sequence, one new token: RMSNorm and rotate its query and key heads,
 *                     write its key and value into the sequence's slot, then attend over the
 *                     slot, reading each key and value once for all the query heads that share
 *                     it (grouped-query attention)
 *
 * and sample_rows draws the next tokens from the logits in one pass over the vocabulary each.
 *
 * The two layer kernels stream their operand at 65-75% of the core's read bandwidth, where MKL's
 * small GEMMs and PyTorch's CPU attention reach 35-45% on these shapes (bench/decode_ceiling.py),
 * and doing the norms, rotary, gate and residual adds inside them saves about 55 small torch calls
 * a layer.
 *
 * fp32 throughout; sums are reassociated (-fassociative-math) so they vectorise, which changes the
 * rounding by ~1e-7 relative against torch's kernels, and exp is a polynomial with ~2e-7 relative
 * error. No global state: safe to call from any thread.
 */
#include <math.h>
#include <stdint.h>

/* e^x by 2^n * e^r: n = round(x / ln 2), r = x - n ln 2 (ln 2 split in two for exactness), e^r by
 * a degree-6 polynomial on [-ln2/2, ln2/2] (relative error ~2e-7). Below -87, where e^x (< 1.7e-38)
 * is zero next to any term it is added to, it is 0 (so a token of no mass has none); above 88 it is
 * e^88; NaN stays NaN. 2^n is built from the bits of n + 1.5 * 2^23 (whose low bits are n) in
 * unsigned arithmetic, so no float is converted to an integer: no undefined behaviour for a NaN. */
static inline float exp_approx(float x) {
    float c = x < -87.0f ? -87.0f : x; /* a NaN passes both clamps */
    c = c > 88.0f ? 88.0f : c;
    float n = __builtin_roundf(c * 1.44269504088896341f);
    float r = c - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union {
        float f;
        uint32_t u;
    } shifted = {n + 12582912.0f}, scale;
    scale.u = (shifted.u - 0x4B400000u + 127u) << 23;
    return x < -87.0f ? 0.0f : p * scale.f;
}

/* dst = src * weight / sqrt(mean(src^2) + eps) over `dim` floats (weight NULL: no weight). */
static inline void rms_norm(const float *src, const float *weight, int dim, float eps, float *dst) {
    float squares = 0.0f;
    for (int j = 0; j < dim; j++) squares += src[j] * src[j];
    float inv = 1.0f / sqrtf(squares / (float)dim + eps);
    if (weight)
        for (int j = 0; j < dim; j++) dst[j] = src[j] * inv * weight[j];
    else
        for (int j = 0; j < dim; j++) dst[j] = src[j] * inv;
}

/* y [n, out] = f(x) @ w [out, inner]^T, or y += it (accumulate). f: x [n, inner] RMS-normed with
 * norm_weight (not NULL), or SiLU-gated (glu: x is [n, 2 * inner], gate then up: silu(gate) * up),
 * or x as is. Rows of f(x) in blocks of 4 kept in L1 (scratch: n * inner floats) while w streams.
 * Sizes are checked by the binding (native_kernels.py's table), not here. */
void skinny_matmul(const float *x, const float *w, int n, int inner, int out, float *y,
                   const float *norm_weight, float eps, int glu, int accumulate, float *scratch) {
    const float *a = x;
    if (norm_weight) {
        for (int r = 0; r < n; r++) rms_norm(x + (int64_t)r * inner, norm_weight, inner, eps, scratch + (int64_t)r * inner);
        a = scratch;
    } else if (glu) {
        for (int r = 0; r < n; r++) {
            const float *gate = x + (int64_t)r * 2 * inner, *up = gate + inner;
            float *dst = scratch + (int64_t)r * inner;
            for (int j = 0; j < inner; j++) dst[j] = gate[j] / (1.0f + exp_approx(-gate[j])) * up[j];
        }
        a = scratch;
    }
    for (int r0 = 0; r0 < n; r0 += 4) {
        int nr = n - r0 < 4 ? n - r0 : 4;
        const float *x0 = a + (int64_t)r0 * inner;
        for (int o = 0; o < out; o++) {
            const float *wo = w + (int64_t)o * inner;
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            if (nr == 4) {
                const float *x1 = x0 + inner, *x2 = x1 + inner, *x3 = x2 + inner;
                float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
                for (int j = 0; j < inner; j++) {
                    float wj = wo[j];
                    a0 += wj * x0[j];
                    a1 += wj * x1[j];
                    a2 += wj * x2[j];
                    a3 += wj * x3[j];
                }
                acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3;
            } else {
                for (int r = 0; r < nr; r++) {
                    const float *xr = x0 + (int64_t)r * inner;
                    float s = 0.0f;
                    for (int j = 0; j < inner; j++) s += wo[j] * xr[j];
                    acc[r] = s;
                }
            }
            for (int r = 0; r < nr; r++) {
                float *dst = y + (int64_t)(r0 + r) * out + o;
                *dst = accumulate ? *dst + acc[r] : acc[r];
            }
        }
    }
}

#define MAX_GROUP 64
#define MAX_DIM 1024

/* One layer's attention for `rows` sequences that each feed one token.
 *
 * qkv [rows, qkv_stride]: each row's `heads` query vectors, then `kv_heads` keys, then `kv_heads`
 * values, `dim` floats each. Unless qk_norm is NULL, each query and key head is first RMS-normed
 * with its row of qk_norm [heads + kv_heads, dim] and rotated by the rotary tables at the row's
 * position (cos and sign-folded sin [table_rows, dim]: x * cos + roll(x, dim / 2) * sin), in place.
 * slots[r] is the address of row r's slot, a contiguous float tensor [layers, 2, kv_heads,
 * capacities[r], dim]; positions[r] < capacities[r] is where its new key and value go, and it
 * attends over positions [0, positions[r]]. out [rows, heads * dim]; work holds work_floats >=
 * group * (max position + 1) floats, group = heads / kv_heads <= MAX_GROUP. That each slot has
 * more than `layer` layers, kv_heads heads of dim floats, is the binding's check (the slots are
 * addresses here).
 * Returns 0, or -1 when the arguments cannot be right (nothing written). */
int decode_attention(float *qkv, int rows, int qkv_stride, const int64_t *slots,
                     const int64_t *capacities, const int64_t *positions, int layer, int heads,
                     int kv_heads, int dim, float scale, const float *qk_norm, const float *cos_table,
                     const float *sin_table, int table_rows, float eps, float *work, int64_t work_floats,
                     float *out) {
    int group = kv_heads > 0 ? heads / kv_heads : 0;
    if (group <= 0 || group * kv_heads != heads || group > MAX_GROUP || dim > MAX_DIM || dim % 2) return -1;
    if (layer < 0 || qkv_stride < (heads + 2 * kv_heads) * dim) return -1;
    for (int r = 0; r < rows; r++)
        if (positions[r] < 0 || positions[r] >= capacities[r] || (qk_norm && positions[r] >= table_rows) ||
            (int64_t)group * (positions[r] + 1) > work_floats)
            return -1;
    for (int r = 0; r < rows; r++) {
        float *q = qkv + (int64_t)r * qkv_stride;
        int64_t cap = capacities[r], pos = positions[r], length = pos + 1;
        if (qk_norm) {
            const float *c = cos_table + pos * dim, *s = sin_table + pos * dim;
            float normed[MAX_DIM];
            int half = dim / 2;
            for (int h = 0; h < heads + kv_heads; h++) {
                float *x = q + (int64_t)h * dim;
                rms_norm(x, qk_norm + (int64_t)h * dim, dim, eps, normed);
                for (int j = 0; j < half; j++) x[j] = normed[j] * c[j] + normed[j + half] * s[j];
                for (int j = half; j < dim; j++) x[j] = normed[j] * c[j] + normed[j - half] * s[j];
            }
        }
        const float *new_k = q + (int64_t)heads * dim, *new_v = new_k + (int64_t)kv_heads * dim;
        float *keys = (float *)(intptr_t)slots[r] + (int64_t)layer * 2 * kv_heads * cap * dim;
        float *values = keys + (int64_t)kv_heads * cap * dim;
        float *o_row = out + (int64_t)r * heads * dim;
        for (int h = 0; h < kv_heads; h++) {
            float *kh = keys + (int64_t)h * cap * dim, *vh = values + (int64_t)h * cap * dim;
            for (int j = 0; j < dim; j++) {
                kh[pos * dim + j] = new_k[h * dim + j];
                vh[pos * dim + j] = new_v[h * dim + j];
            }
            const float *qh = q + (int64_t)h * group * dim;
            float *oh = o_row + (int64_t)h * group * dim;
            float top[MAX_GROUP], total[MAX_GROUP];
            for (int g = 0; g < group; g++) top[g] = -INFINITY;
            for (int64_t l = 0; l < length; l++) { /* scores: each key read once for the group */
                const float *kl = kh + l * dim;
                for (int g = 0; g < group; g++) {
                    const float *qg = qh + (int64_t)g * dim;
                    float acc = 0.0f;
                    for (int j = 0; j < dim; j++) acc += kl[j] * qg[j];
                    acc *= scale;
                    work[g * length + l] = acc;
                    top[g] = acc > top[g] ? acc : top[g];
                }
            }
            for (int g = 0; g < group; g++) {
                float *sc = work + g * length, m = top[g], t = 0.0f;
                for (int64_t l = 0; l < length; l++) {
                    float e = exp_approx(sc[l] - m);
                    sc[l] = e;
                    t += e;
                }
                total[g] = t;
            }
            for (int i = 0; i < group * dim; i++) oh[i] = 0.0f;
            for (int64_t l = 0; l < length; l++) { /* values: each read once for the group */
                const float *vl = vh + l * dim;
                for (int g = 0; g < group; g++) {
                    float p = work[g * length + l];
                    float *og = oh + (int64_t)g * dim;
                    for (int j = 0; j < dim; j++) og[j] += p * vl[j];
                }
            }
            for (int g = 0; g < group; g++) {
                float inv = 1.0f / total[g];
                for (int j = 0; j < dim; j++) oh[g * dim + j] *= inv;
            }
        }
    }
    return 0;
}

/* One token per row of logits [rows, vocab], drawn from softmax(logits / temperature) by inverse
 * CDF: with uniform[r] in [0, 1), the first token whose running sum of probabilities reaches
 * (1 - uniform[r]) of the total (a token of probability zero, whose running sum equals its left
 * neighbour's, is never the first). ids[r] and logprobs[r] (its log-softmax at that temperature).
 * temperature 0: the argmax (first of equals), with the log-softmax of the unscaled logits; uniform
 * is not read. scratch: vocab floats.
 *
 * If the running sum, added in another order than the total, stops just short of it, the last token
 * with mass is taken. A row that holds a NaN or +inf, or is all -inf, has no distribution: it is
 * refused, as torch's samplers refuse it. Returns 0, or r + 1 for the first row r holding a NaN or
 * +inf, or -(r + 1) for the first row r that is all -inf (rows before it are drawn, none after). */
#define SCAN_BLOCK 64

int sample_rows(const float *logits, int rows, int vocab, float temperature, const float *uniform,
                int64_t *ids, float *logprobs, float *scratch) {
    for (int r = 0; r < rows; r++) {
        const float *row = logits + (int64_t)r * vocab;
        float top = -INFINITY;
        int unordered = 0; /* a NaN or +inf seen (a huge logit over a small temperature included) */
        if (temperature > 0.0f)
            for (int i = 0; i < vocab; i++) {
                scratch[i] = row[i] / temperature;
                unordered |= (scratch[i] != scratch[i]) | (scratch[i] == INFINITY);
            }
        else
            for (int i = 0; i < vocab; i++) {
                scratch[i] = row[i];
                unordered |= (scratch[i] != scratch[i]) | (scratch[i] == INFINITY);
            }
        if (unordered) return r + 1;
        float lanes[16];
        for (int j = 0; j < 16; j++) lanes[j] = -INFINITY;
        int i0 = 0;
        for (; i0 + 16 <= vocab; i0 += 16) /* 16 running maxima side by side: vectorises */
            for (int j = 0; j < 16; j++) lanes[j] = scratch[i0 + j] > lanes[j] ? scratch[i0 + j] : lanes[j];
        for (; i0 < vocab; i0++) top = scratch[i0] > top ? scratch[i0] : top;
        for (int j = 0; j < 16; j++) top = lanes[j] > top ? lanes[j] : top;
        if (top == -INFINITY) return -(r + 1);
        int64_t best = 0;
        while (best < vocab - 1 && scratch[best] != top) best++;
        float total = 0.0f;
        for (int i = 0; i < vocab; i++) {
            float e = exp_approx(scratch[i] - top);
            total += e;
            scratch[i] = e;
        }
        float log_total = top + logf(total);
        int64_t pick = best;
        if (temperature > 0.0f) {
            float target = (1.0f - uniform[r]) * total, running = 0.0f;
            int i = 0;
            for (; i + SCAN_BLOCK <= vocab; i += SCAN_BLOCK) { /* whole blocks while they fall short */
                float block = 0.0f;
                for (int j = 0; j < SCAN_BLOCK; j++) block += scratch[i + j];
                if (running + block >= target) break;
                running += block;
            }
            pick = -1;
            for (; i < vocab; i++) { /* then token by token */
                running += scratch[i];
                if (running >= target) {
                    pick = i;
                    break;
                }
            }
            if (pick < 0) /* the running sum, added in another order, stopped just short of total */
                for (int i = vocab - 1; i >= 0; i--) /* the last token with mass (exp_approx: 0 below -87) */
                    if (scratch[i] > 0.0f) {
                        pick = i;
                        break;
                    }
        }
        ids[r] = pick;
        float z = temperature > 0.0f ? row[pick] / temperature : row[pick];
        logprobs[r] = z - log_total;
    }
    return 0;
}
