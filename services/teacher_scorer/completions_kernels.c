/* The hot loops of the OpenAI-compatible prompt log-probs codec (completions_codec.py), as C built
 * by completions_native.py. At K = 50 an answer is ~2.4 KB of JSON per position; in Python, writing
 * it costs ~35 us per scored token and reading it ~75 us (a dict per entry is the floor of any
 * Python JSON parser), which is most of what the endpoint path costs over the packed handle path
 * (bench/teacher_throughput.py).
 *
 *   write_positions  one prompt's "prompt_logprobs" list from our top-K arrays, each log-prob with
 *                    9 significant digits (as "%.9g" writes them: every float32 comes back exactly)
 *   parse_answer     a whole /v1/completions answer into flat arrays: for each choice its index,
 *                    its positions and its prompt_token_ids; for each position its entries (token
 *                    id, log-prob, rank)
 *
 * parse_answer is a strict JSON reader for the shape the codec reads. It refuses (returns < 0)
 * whatever it cannot read exactly as the Python reader would: escapes in the keys it reads, a
 * duplicate of one of those keys, a number or a token id it does not take, invalid UTF-8, a full
 * output buffer. The codec then reads the answer in Python, which says what is wrong with it (or
 * reads it). What it accepts it reads as json + Python would: numbers correctly rounded to double,
 * a rank that is not an integer ignored, keys it does not read skipped.
 *
 * No global state: safe to call from any thread.
 */
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * Writing
 * ------------------------------------------------------------------------------------------- */

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static char *put_uint(char *out, uint64_t v) {
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) *out++ = tmp[--n];
    return out;
}

static char *put_int(char *out, int64_t v) {
    if (v < 0) {
        *out++ = '-';
        return put_uint(out, (uint64_t)(-(v + 1)) + 1);
    }
    return put_uint(out, (uint64_t)v);
}

/* v * 10^k for any k a float32 needs (|k| <= 54): one rounding up to 1e22, a few more past it
 * (the digits it feeds are 9, of a double's 17). */
static double scale10(double v, int k) {
    while (k > 22) v *= POW10[22], k -= 22;
    while (k < -22) v /= POW10[22], k += 22;
    return k >= 0 ? v * POW10[k] : v / POW10[-k];
}

/* What "%.9g" writes for a finite float: 9 significant digits, trailing zeros dropped, positional
 * for decimal exponents -4..8, else d.ddde+XX. The digits are v * 10^(8 - X) rounded to nearest
 * (half even); where the scaling rounds, the last digit can be one off "%.9g"'s, still within
 * float32's half ulp, so the float comes back. */
static char *put_f32(char *out, float f) {
    double v = f;
    if (v == 0.0) {
        if (signbit(v)) *out++ = '-';
        *out++ = '0';
        return out;
    }
    if (v < 0) {
        *out++ = '-';
        v = -v;
    }
    int x = (int)floor(log10(v));
    double s = rint(scale10(v, 8 - x));
    if (s >= 1e9) {
        x += 1;
        s = rint(scale10(v, 8 - x));
    } else if (s < 1e8) {
        x -= 1;
        s = rint(scale10(v, 8 - x));
    }
    if (s >= 1e9) { /* rounded up to the next power of ten */
        s = 1e8;
        x += 1;
    }
    char digits[9];
    uint64_t d = (uint64_t)s;
    for (int i = 8; i >= 0; i--) {
        digits[i] = (char)('0' + d % 10);
        d /= 10;
    }
    int last = 8; /* the last digit written */
    while (last > 0 && digits[last] == '0') last--;
    if (x < -4 || x >= 9) {
        *out++ = digits[0];
        if (last > 0) {
            *out++ = '.';
            for (int i = 1; i <= last; i++) *out++ = digits[i];
        }
        *out++ = 'e';
        *out++ = x < 0 ? '-' : '+';
        int ax = x < 0 ? -x : x;
        if (ax < 10) *out++ = '0';
        return put_uint(out, (uint64_t)ax);
    }
    if (x < 0) {
        *out++ = '0';
        *out++ = '.';
        for (int i = 0; i < -x - 1; i++) *out++ = '0';
        for (int i = 0; i <= last; i++) *out++ = digits[i];
        return out;
    }
    for (int i = 0; i <= x; i++) *out++ = digits[i];
    if (last > x) {
        *out++ = '.';
        for (int i = x + 1; i <= last; i++) *out++ = digits[i];
    }
    return out;
}

static char *put_text(char *out, const char *text) {
    size_t n = strlen(text);
    memcpy(out, text, n);
    return out + n;
}

/* The longest one entry can be: "id":{"logprob":f,"rank":r}, plus a comma. */
#define ENTRY_BYTES 96

/* prompt_logprobs for a prompt of n_prompt tokens: null, then for each position p >= 1 the top-K
 * (top_ids / top_lps [n_prompt - 1, k], ranks 1..k) and, where it is not among them, the token
 * there with its log-prob (token_lp) and rank null. Returns the bytes written into out, or -1 when
 * out_capacity is too small (-2 for a non-finite log-prob, which JSON cannot carry). */
int64_t write_positions(const int64_t *prompt, int64_t n_prompt, const int64_t *top_ids, const float *top_lps,
                        const float *token_lp, int64_t k, char *out, int64_t out_capacity) {
    char *at = out, *end = out + out_capacity;
    if (end - at < 8) return -1;
    at = put_text(at, "[null");
    for (int64_t p = 0; p + 1 < n_prompt; p++) {
        if (end - at < (k + 1) * ENTRY_BYTES + 8) return -1;
        const int64_t *ids = top_ids + p * k;
        const float *lps = top_lps + p * k;
        int64_t token = prompt[p + 1];
        int in_top = 0;
        *at++ = ',';
        *at++ = '{';
        for (int64_t j = 0; j < k; j++) {
            if (!isfinite(lps[j])) return -2;
            in_top |= ids[j] == token;
            if (j) *at++ = ',';
            *at++ = '"';
            at = put_int(at, ids[j]);
            at = put_text(at, "\":{\"logprob\":");
            at = put_f32(at, lps[j]);
            at = put_text(at, ",\"rank\":");
            at = put_uint(at, (uint64_t)(j + 1));
            *at++ = '}';
        }
        if (!in_top) {
            if (!isfinite(token_lp[p])) return -2;
            if (k) *at++ = ',';
            *at++ = '"';
            at = put_int(at, token);
            at = put_text(at, "\":{\"logprob\":");
            at = put_f32(at, token_lp[p]);
            at = put_text(at, ",\"rank\":null}");
        }
        *at++ = '}';
    }
    *at++ = ']';
    return at - out;
}

/* ---------------------------------------------------------------------------------------------
 * Reading
 * ------------------------------------------------------------------------------------------- */

enum {
    REFUSED = -1, /* not JSON, or JSON this reader does not take: the caller reads it in Python */
    FULL = -2,    /* an output buffer is full */
};

typedef struct {
    const char *at, *end;
    /* outputs, each with its capacity and fill */
    int64_t *choice; /* per choice: index, first position, positions, first token, tokens (-1: none) */
    int64_t choices, choices_cap;
    int64_t *position; /* per position: first entry, entries (-1: null) */
    int64_t positions, positions_cap;
    int64_t *entry_id, *entry_rank; /* rank INT64_MIN: none, or not an integer */
    double *entry_lp;
    int64_t entries, entries_cap;
    int64_t *token;
    int64_t tokens, tokens_cap;
} Reader;

static void skip_ws(Reader *r) {
    while (r->at < r->end && (*r->at == ' ' || *r->at == '\n' || *r->at == '\r' || *r->at == '\t')) r->at++;
}

static int take(Reader *r, char c) {
    skip_ws(r);
    if (r->at < r->end && *r->at == c) {
        r->at++;
        return 1;
    }
    return 0;
}

static int hex4(const char *at, unsigned *value) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = at[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return 0;
    }
    *value = v;
    return 1;
}

/* A string at r->at (after whitespace): its raw content in [*start, *stop), whether it holds an
 * escape in *escaped. Refuses control characters, bad escapes, lone surrogate escapes and invalid UTF-8. */
static int read_string(Reader *r, const char **start, const char **stop, int *escaped) {
    if (!take(r, '"')) return REFUSED;
    *start = r->at;
    *escaped = 0;
    while (r->at < r->end) {
        unsigned char c = (unsigned char)*r->at;
        if (c == '"') {
            *stop = r->at++;
            return 0;
        }
        if (c < 0x20) return REFUSED;
        if (c == '\\') {
            *escaped = 1;
            if (r->end - r->at < 2) return REFUSED;
            char e = r->at[1];
            if (e == 'u') {
                unsigned v, low;
                if (r->end - r->at < 6 || !hex4(r->at + 2, &v) || (v >= 0xDC00 && v <= 0xDFFF)) return REFUSED;
                r->at += 6;
                if (v >= 0xD800 && v <= 0xDBFF) { /* a pair (json.dumps writes one past U+FFFF) */
                    if (r->end - r->at < 6 || r->at[0] != '\\' || r->at[1] != 'u' || !hex4(r->at + 2, &low) ||
                        low < 0xDC00 || low > 0xDFFF)
                        return REFUSED;
                    r->at += 6;
                }
            } else if (strchr("\"\\/bfnrt", e) && e) {
                r->at += 2;
            } else {
                return REFUSED;
            }
            continue;
        }
        if (c < 0x80) {
            r->at++;
            continue;
        }
        /* UTF-8: the lead byte's length, continuation bytes, no overlong forms or surrogates */
        int n;
        unsigned cp;
        if (c >= 0xC2 && c <= 0xDF) n = 1, cp = c & 0x1F;
        else if (c >= 0xE0 && c <= 0xEF) n = 2, cp = c & 0x0F;
        else if (c >= 0xF0 && c <= 0xF4) n = 3, cp = c & 0x07;
        else return REFUSED;
        if (r->end - r->at <= n) return REFUSED;
        for (int i = 1; i <= n; i++) {
            unsigned char b = (unsigned char)r->at[i];
            if ((b & 0xC0) != 0x80) return REFUSED;
            cp = (cp << 6) | (b & 0x3F);
        }
        if ((n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return REFUSED;
        r->at += n + 1;
    }
    return REFUSED;
}

/* A JSON number: its value correctly rounded to double; *integer: it has no fraction or exponent
 * (then its value is in *as_int). Refuses what JSON does not allow (NaN, Infinity, +1, .5, 01)
 * and integers of more than 18 digits (Python keeps those exact). */
static int read_number(Reader *r, double *value, int *integer, int64_t *as_int) {
    skip_ws(r);
    const char *start = r->at, *at = r->at, *end = r->end;
    int negative = at < end && *at == '-';
    at += negative;
    if (at >= end || *at < '0' || *at > '9') return REFUSED;
    /* the first 19 significant digits in mantissa, the value being mantissa * 10^power */
    uint64_t mantissa = 0;
    int kept = 0, power = 0, inexact = 0, int_digits = 0;
    if (*at == '0') {
        at++;
        int_digits = 1;
    } else {
        for (; at < end && *at >= '0' && *at <= '9'; at++, int_digits++) {
            if (kept < 19) mantissa = mantissa * 10 + (uint64_t)(*at - '0'), kept++;
            else power++, inexact |= *at != '0';
        }
    }
    int is_int = 1;
    if (at < end && *at == '.') {
        is_int = 0;
        at++;
        if (at >= end || *at < '0' || *at > '9') return REFUSED;
        for (; at < end && *at >= '0' && *at <= '9'; at++) {
            if (mantissa == 0 && *at == '0') power--;
            else if (kept < 19) mantissa = mantissa * 10 + (uint64_t)(*at - '0'), kept++, power--;
            else inexact |= *at != '0';
        }
    }
    if (at < end && (*at == 'e' || *at == 'E')) {
        is_int = 0;
        at++;
        int sign = 1, exp_value = 0;
        if (at < end && (*at == '+' || *at == '-')) sign = *at++ == '-' ? -1 : 1;
        if (at >= end || *at < '0' || *at > '9') return REFUSED;
        for (; at < end && *at >= '0' && *at <= '9'; at++)
            if (exp_value < 100000) exp_value = exp_value * 10 + (*at - '0');
        power += sign * exp_value;
    }
    r->at = at;
    if (is_int && int_digits > 18) return REFUSED;
    *integer = is_int;
    if (is_int) *as_int = negative ? -(int64_t)mantissa : (int64_t)mantissa;
    if (!inexact && mantissa <= (1ULL << 53) && power >= -22 && power <= 22) {
        /* both operands exact doubles: one rounding, so correctly rounded */
        double m = (double)mantissa;
        double v = power >= 0 ? m * POW10[power] : m / POW10[-power];
        *value = negative ? -v : v;
        return 0;
    }
    /* else the C library's correctly rounded strtod, which reads the locale's decimal point */
    const char *point = localeconv()->decimal_point;
    char buffer[64];
    if (point[0] != '.' || point[1] || at - start >= (long)sizeof buffer) return REFUSED;
    memcpy(buffer, start, (size_t)(at - start));
    buffer[at - start] = 0;
    *value = strtod(buffer, NULL);
    return 0;
}

static int skip_value(Reader *r, int depth);

static int skip_container(Reader *r, char close, int is_object, int depth) {
    if (take(r, close)) return 0;
    do {
        if (is_object) {
            const char *s, *e;
            int esc;
            if (read_string(r, &s, &e, &esc) || !take(r, ':')) return REFUSED;
        }
        if (skip_value(r, depth + 1)) return REFUSED;
    } while (take(r, ','));
    return take(r, close) ? 0 : REFUSED;
}

static int literal(Reader *r, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(r->end - r->at) < n || memcmp(r->at, word, n)) return REFUSED;
    r->at += n;
    return 0;
}

static int skip_value(Reader *r, int depth) {
    if (depth > 64) return REFUSED;
    skip_ws(r);
    if (r->at >= r->end) return REFUSED;
    switch (*r->at) {
    case '{': r->at++; return skip_container(r, '}', 1, depth);
    case '[': r->at++; return skip_container(r, ']', 0, depth);
    case '"': {
        const char *s, *e;
        int esc;
        return read_string(r, &s, &e, &esc);
    }
    case 't': return literal(r, "true");
    case 'f': return literal(r, "false");
    case 'n': return literal(r, "null");
    default: {
        double v;
        int integer;
        int64_t i;
        return read_number(r, &v, &integer, &i);
    }
    }
}

static int is_null(Reader *r) {
    skip_ws(r);
    return literal(r, "null") == 0;
}

/* A key this reader matches: no escapes (one could spell a key it reads otherwise). */
static int read_key(Reader *r, const char **start, size_t *length) {
    const char *s, *e;
    int escaped;
    if (read_string(r, &s, &e, &escaped) || escaped || !take(r, ':')) return REFUSED;
    *start = s;
    *length = (size_t)(e - s);
    return 0;
}

static int key_is(const char *key, size_t length, const char *name) {
    return strlen(name) == length && !memcmp(key, name, length);
}

/* {"<id>": {"logprob": number, "rank": integer | anything, ...}, ...} into the entry arrays. */
static int read_position(Reader *r) {
    if (r->positions >= r->positions_cap) return FULL;
    int64_t *slot = r->position + 2 * r->positions++;
    if (is_null(r)) {
        slot[0] = r->entries;
        slot[1] = -1;
        return 0;
    }
    if (!take(r, '{')) return REFUSED;
    slot[0] = r->entries;
    slot[1] = 0;
    if (take(r, '}')) return 0;
    do {
        const char *key;
        size_t length;
        if (read_key(r, &key, &length) || length == 0 || length > 18) return REFUSED;
        int64_t id = 0;
        for (size_t i = 0; i < length; i++) {
            if (key[i] < '0' || key[i] > '9') return REFUSED;
            id = id * 10 + (key[i] - '0');
        }
        if (r->entries >= r->entries_cap) return FULL;
        int64_t e = r->entries++;
        slot[1]++;
        int seen_lp = 0, seen_rank = 0;
        r->entry_id[e] = id;
        r->entry_rank[e] = INT64_MIN;
        if (!take(r, '{')) return REFUSED;
        if (!take(r, '}')) {
            do {
                const char *name;
                size_t n;
                if (read_key(r, &name, &n)) return REFUSED;
                if (key_is(name, n, "logprob")) {
                    int integer;
                    int64_t as_int;
                    if (seen_lp++ || read_number(r, &r->entry_lp[e], &integer, &as_int)) return REFUSED;
                    /* Python keeps an integer exact: past 2^53 it compares and rounds otherwise than
                     * a double; within, it is the double of its value (-0 is 0) */
                    if (integer && (as_int > (1LL << 53) || as_int < -(1LL << 53))) return REFUSED;
                    if (integer) r->entry_lp[e] = (double)as_int;
                } else if (key_is(name, n, "rank")) {
                    if (seen_rank++) return REFUSED;
                    skip_ws(r);
                    if (r->at < r->end && (*r->at == '-' || (*r->at >= '0' && *r->at <= '9'))) {
                        double v;
                        int integer;
                        int64_t as_int;
                        if (read_number(r, &v, &integer, &as_int)) return REFUSED;
                        if (integer) r->entry_rank[e] = as_int;
                    } else if (skip_value(r, 4)) {
                        return REFUSED;
                    }
                } else if (skip_value(r, 4)) {
                    return REFUSED;
                }
            } while (take(r, ','));
            if (!take(r, '}')) return REFUSED;
        }
        if (!seen_lp) return REFUSED;
    } while (take(r, ','));
    return take(r, '}') ? 0 : REFUSED;
}

static int read_choice(Reader *r) {
    if (r->choices >= r->choices_cap) return FULL;
    int64_t *c = r->choice + 5 * r->choices++;
    int seen_index = 0, seen_positions = 0, seen_tokens = 0;
    c[3] = 0;
    c[4] = -1;
    if (!take(r, '{')) return REFUSED;
    if (take(r, '}')) return REFUSED;
    do {
        const char *key;
        size_t n;
        if (read_key(r, &key, &n)) return REFUSED;
        if (key_is(key, n, "index")) {
            double v;
            int integer;
            if (seen_index++ || read_number(r, &v, &integer, &c[0]) || !integer) return REFUSED;
        } else if (key_is(key, n, "prompt_logprobs")) {
            if (seen_positions++ || !take(r, '[')) return REFUSED;
            c[1] = r->positions;
            c[2] = 0;
            if (!take(r, ']')) {
                do {
                    int status = read_position(r);
                    if (status) return status;
                    c[2]++;
                } while (take(r, ','));
                if (!take(r, ']')) return REFUSED;
            }
        } else if (key_is(key, n, "prompt_token_ids")) {
            if (seen_tokens++) return REFUSED;
            if (is_null(r)) continue;
            if (!take(r, '[')) return REFUSED;
            c[3] = r->tokens;
            c[4] = 0;
            if (!take(r, ']')) {
                do {
                    double v;
                    int integer;
                    if (r->tokens >= r->tokens_cap) return FULL;
                    if (read_number(r, &v, &integer, &r->token[r->tokens]) || !integer) return REFUSED;
                    r->tokens++;
                    c[4]++;
                } while (take(r, ','));
                if (!take(r, ']')) return REFUSED;
            }
        } else if (skip_value(r, 2)) {
            return REFUSED;
        }
    } while (take(r, ','));
    if (!take(r, '}') || !seen_index || !seen_positions) return REFUSED;
    return 0;
}

/* Reads a whole answer. counts (out, 4): choices, positions, entries, tokens read. choice (out,
 * [choices_cap, 5]): index, first position, positions, first token, tokens (-1: no
 * prompt_token_ids). position (out, [positions_cap, 2]): first entry, entries (-1: null). Returns
 * 0, REFUSED, or FULL. */
int parse_answer(const char *body, int64_t length, int64_t *counts, int64_t *choice, int64_t choices_cap,
                 int64_t *position, int64_t positions_cap, int64_t *entry_id, double *entry_lp,
                 int64_t *entry_rank, int64_t entries_cap, int64_t *token, int64_t tokens_cap) {
    Reader r = {body, body + length, choice, 0, choices_cap, position, 0, positions_cap, entry_id, entry_rank,
                entry_lp, 0, entries_cap, token, 0, tokens_cap};
    int status = REFUSED, seen_choices = 0;
    if (!take(&r, '{') || take(&r, '}')) goto done;
    do {
        const char *key;
        size_t n;
        if (read_key(&r, &key, &n)) goto done;
        if (key_is(key, n, "choices")) {
            if (seen_choices++ || !take(&r, '[')) goto done;
            if (!take(&r, ']')) {
                do {
                    int s = read_choice(&r);
                    if (s) {
                        status = s;
                        goto done;
                    }
                } while (take(&r, ','));
                if (!take(&r, ']')) goto done;
            }
        } else if (skip_value(&r, 1)) {
            goto done;
        }
    } while (take(&r, ','));
    if (!take(&r, '}') || !seen_choices) goto done;
    skip_ws(&r);
    status = r.at == r.end ? 0 : REFUSED;
done:
    counts[0] = r.choices;
    counts[1] = r.positions;
    counts[2] = r.entries;
    counts[3] = r.tokens;
    return status;
}

/* ---------------------------------------------------------------------------------------------
 * Selecting
 * ------------------------------------------------------------------------------------------- */

/* Merge sorts, O(n log n) for any input and O(n) for input already in order (answers come in rank
 * order): runs of up to 16 by insertion, and two halves already in order are not merged. tmp holds
 * n / 2 + 1 elements. */
#define SORT_RUN 16

/* Token ids, ascending. */
static void sort_ids(int64_t *v, int64_t *tmp, int64_t n) {
    if (n <= SORT_RUN) {
        for (int64_t i = 1; i < n; i++) {
            int64_t x = v[i], j = i;
            for (; j > 0 && v[j - 1] > x; j--) v[j] = v[j - 1];
            v[j] = x;
        }
        return;
    }
    int64_t h = n / 2;
    sort_ids(v, tmp, h);
    sort_ids(v + h, tmp, n - h);
    if (v[h - 1] <= v[h]) return;
    memcpy(tmp, v, (size_t)h * sizeof *v);
    int64_t i = 0, j = h, o = 0;
    while (i < h && j < n) v[o++] = v[j] < tmp[i] ? v[j++] : tmp[i++];
    while (i < h) v[o++] = tmp[i++];
}

/* Whether ids [n] holds one twice, by a hash set in table (at least 4 n + 16 int64): linear for
 * any ids but those chosen to collide, which exceed the probe budget and are sorted instead (tmp:
 * n / 2 + 1 more), so O(n log n) for every input. Ids are >= 0 (digits in the answer's keys). */
static int has_duplicate(const int64_t *ids, int64_t n, int64_t *table) {
    if (n <= SORT_RUN) { /* a few compares beat a table */
        for (int64_t e = 1; e < n; e++)
            for (int64_t d = 0; d < e; d++)
                if (ids[d] == ids[e]) return 1;
        return 0;
    }
    int bits = 4;
    while (((int64_t)1 << bits) < 2 * n) bits++;
    int64_t size = (int64_t)1 << bits, mask = size - 1, budget = 4 * n + 16;
    for (int64_t s = 0; s < size; s++) table[s] = -1;
    for (int64_t e = 0; e < n; e++) {
        int64_t slot = (int64_t)(((uint64_t)ids[e] * 0x9E3779B97F4A7C15ULL) >> (64 - bits));
        while (table[slot] >= 0) {
            if (table[slot] == ids[e]) return 1;
            if (--budget < 0) goto sort;
            slot = (slot + 1) & mask;
        }
        table[slot] = ids[e];
    }
    return 0;
sort:
    memcpy(table, ids, (size_t)n * sizeof *ids);
    sort_ids(table, table + n, n);
    for (int64_t e = 1; e < n; e++)
        if (table[e - 1] == table[e]) return 1;
    return 0;
}

/* Entry a ranks before entry b: the higher log-prob, ties the lower id (the Python reader's order). */
static inline int ranks_before(const double *lp, const int64_t *id, int64_t a, int64_t b) {
    return lp[a] > lp[b] || (lp[a] == lp[b] && id[a] < id[b]);
}

/* Entry indices in rank order. */
static void sort_ranked(int64_t *v, int64_t *tmp, int64_t n, const double *lp, const int64_t *id) {
    if (n <= SORT_RUN) {
        for (int64_t i = 1; i < n; i++) {
            int64_t x = v[i], j = i;
            for (; j > 0 && ranks_before(lp, id, x, v[j - 1]); j--) v[j] = v[j - 1];
            v[j] = x;
        }
        return;
    }
    int64_t h = n / 2;
    sort_ranked(v, tmp, h, lp, id);
    sort_ranked(v + h, tmp, n - h, lp, id);
    if (!ranks_before(lp, id, v[h], v[h - 1])) return;
    memcpy(tmp, v, (size_t)h * sizeof *v);
    int64_t i = 0, j = h, o = 0;
    while (i < h && j < n) v[o++] = ranks_before(lp, id, v[j], tmp[i]) ? v[j++] : tmp[i++];
    while (i < h) v[o++] = tmp[i++];
}

/* For n scored positions (at[i]: the position's row in parse_answer's `position`, token[i]: the
 * token there), the top k entries by log-prob (high first, ties: the lower id first), leaving out
 * entries ranked below k (rank > k), into top_ids / top_lps [n, k], and the log-prob of the token
 * there into token_lp [n]. scratch holds at least 4 e + 16 int64 for the most entries e one of
 * these positions has (the caller checks every size). O(e log e) for a position of e entries.
 * Returns 0, or 1 where a position is null or has too few entries left, holds a token id twice, a
 * log-prob that is not finite (as a double, or as the float32 it is returned as), or no entry for
 * its token: the caller then reads the answer in Python, which words the error. */
int select_top_k(const int64_t *position, const int64_t *entry_id, const double *entry_lp,
                 const int64_t *entry_rank, const int64_t *at, const int64_t *token, int64_t n, int64_t k,
                 int64_t *top_ids, float *top_lps, float *token_lp, int64_t *scratch) {
    for (int64_t i = 0; i < n; i++) {
        int64_t first = position[2 * at[i]], count = position[2 * at[i] + 1];
        if (count < k) return 1; /* null (-1) or too few */
        const int64_t *ids = entry_id + first;
        const double *lps = entry_lp + first;
        int64_t found = 0;
        for (int64_t e = 0; e < count; e++) {
            if (!isfinite(lps[e])) return 1;
            if (ids[e] == token[i]) {
                found++;
                token_lp[i] = (float)lps[e];
            }
        }
        if (found != 1 || !isfinite(token_lp[i])) return 1;
        if (has_duplicate(ids, count, scratch)) return 1; /* Python keeps the last: read it there */
        int64_t eligible = 0;
        for (int64_t e = 0; e < count; e++)
            if (entry_rank[first + e] <= k) scratch[eligible++] = e;
        if (eligible < k) return 1;
        sort_ranked(scratch, scratch + eligible, eligible, lps, ids);
        for (int64_t j = 0; j < k; j++) {
            float lp = (float)lps[scratch[j]];
            if (!isfinite(lp)) return 1;
            top_ids[i * k + j] = ids[scratch[j]];
            top_lps[i * k + j] = lp;
        }
    }
    return 0;
}
