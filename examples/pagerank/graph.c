#define _GNU_SOURCE
#include "graph.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- id map: original id -> dense id (open addressing, doubling) ------- */

typedef struct idmap {
    uint64_t *keys;
    uint32_t *vals; /* dense id + 1; 0 = empty */
    size_t cap, used;
    uint64_t salt; /* random per map: ids chosen to collide in one run's hash do not in another's */
} idmap_t;

/* A salt for a new map; the dense ids do not depend on it (they follow the
 * ids' first appearance), only where the table keeps them. */
static uint64_t idmap_salt(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        v = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 32);
    }
    return v;
}

static uint64_t mix(uint64_t k, uint64_t salt)
{
    k ^= salt;
    k ^= k >> 30;
    k *= 0xbf58476d1ce4e5b9ull;
    k ^= k >> 27;
    k *= 0x94d049bb133111ebull;
    return k ^ (k >> 31);
}

static int idmap_grow(idmap_t *m)
{
    size_t cap = m->cap ? m->cap * 2 : 1024;
    uint64_t *keys = calloc(cap, sizeof *keys);
    uint32_t *vals = calloc(cap, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->vals[i])
            continue;
        size_t j = mix(m->keys[i], m->salt) & (cap - 1);
        while (vals[j])
            j = (j + 1) & (cap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return 0;
}

/* The dense id of key, adding it (as n) when new. -1: out of memory or ids. */
static int64_t idmap_get(idmap_t *m, uint64_t key, uint32_t n)
{
    if ((m->used + 1) * 2 > m->cap && idmap_grow(m) != 0)
        return -1;
    size_t j = mix(key, m->salt) & (m->cap - 1);
    while (m->vals[j]) {
        if (m->keys[j] == key)
            return m->vals[j] - 1;
        j = (j + 1) & (m->cap - 1);
    }
    if (n >= GB_GRAPH_MAX_VERTICES)
        return -1;
    m->keys[j] = key;
    m->vals[j] = n + 1;
    m->used++;
    return n;
}

/* ---- graph ------------------------------------------------------------- */

static int push_edge(gb_graph_t *g, uint64_t *cap, uint32_t s, uint32_t d)
{
    if (g->m == *cap) {
        uint64_t nc = *cap ? *cap * 2 : 4096;
        uint32_t *ns = realloc(g->src, nc * sizeof *ns);
        if (!ns)
            return -1;
        g->src = ns;
        uint32_t *nd = realloc(g->dst, nc * sizeof *nd);
        if (!nd)
            return -1;
        g->dst = nd;
        *cap = nc;
    }
    g->src[g->m] = s;
    g->dst[g->m] = d;
    g->m++;
    return 0;
}

void gb_graph_destroy(gb_graph_t **pg)
{
    if (!pg || !*pg)
        return;
    gb_graph_t *g = *pg;
    free(g->src);
    free(g->dst);
    free(g->orig_id);
    free(g->row);
    free(g->col);
    free(g);
    *pg = NULL;
}

/* The first 40 bytes of the line [p, eol) for a message: printable ASCII as
 * is, anything else (control bytes, NUL, UTF-8 or binary) as \xNN, so that a
 * binary file does not reach the terminal raw; "..." when cut. */
static void excerpt(char *out, size_t cap, const char *p, const char *eol)
{
    size_t o = 0;
    const char *end = eol - p > 40 ? p + 40 : eol;
    for (; p < end && o + 5 < cap; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch >= 0x20 && ch < 0x7f && ch != '\\')
            out[o++] = (char)ch;
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
    }
    if (end < eol && o + 4 < cap)
        o += (size_t)snprintf(out + o, cap - o, "...");
    out[o] = 0;
}

/* The id in the field [s, e): 0, or -1 with why (naming the field) said. */
static int parse_id(const char *s, const char *e, uint64_t *out, char *why, size_t cap)
{
    char shown[4 * 40 + 8];
    uint64_t v = 0;
    const char *d = s;
    for (; d < e && *d >= '0' && *d <= '9'; d++) {
        unsigned dgt = (unsigned)(*d - '0');
        if (v > (UINT64_MAX - dgt) / 10)
            break;
        v = v * 10 + dgt;
    }
    if (d == e) {
        *out = v;
        return 0;
    }
    excerpt(shown, sizeof shown, s, e);
    const char *t = s + (*s == '-');
    while (t < e && *t >= '0' && *t <= '9')
        t++;
    if (t == e && *s == '-' && e - s > 1)
        snprintf(why, cap, "'%s' is negative: vertex ids are unsigned decimal integers", shown);
    else if (t == e && *s != '-')
        snprintf(why, cap, "vertex id '%s' is out of range (at most %llu)", shown, (unsigned long long)UINT64_MAX);
    else
        snprintf(why, cap, "'%s' is not a vertex id (an unsigned decimal integer)", shown);
    return -1;
}

/* An edge line [s, eol) (leading blanks skipped, not a comment): its two ids,
 * or -1 with why it is not one said. */
static int parse_edge(const char *s, const char *eol, uint64_t *a, uint64_t *b, char *why, size_t cap)
{
    const char *e = eol, *f[2][2] = {{0}};
    unsigned nf = 0;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
        e--;
    if (e > s && memchr(s, '\r', (size_t)(e - s))) {
        snprintf(why, cap, "a carriage return before or between the ids (lines end with \\n or \\r\\n)");
        return -1;
    }
    for (const char *p = s; p < e; nf++) {
        const char *q = p;
        while (q < e && *q != ' ' && *q != '\t')
            q++;
        if (nf < 2) {
            f[nf][0] = p;
            f[nf][1] = q;
        }
        for (p = q; p < e && (*p == ' ' || *p == '\t'); p++)
            ;
    }
    if (nf != 2) {
        snprintf(why, cap, "expected two vertex ids 'source target' separated by blanks, found %u field%s", nf,
                 nf == 1 ? "" : "s");
        return -1;
    }
    return parse_id(f[0][0], f[0][1], a, why, cap) || parse_id(f[1][0], f[1][1], b, why, cap) ? -1 : 0;
}

/* Adds the edge a -> b (original ids) to g. 0, or -1: out of memory or ids. */
static int add_edge(gb_graph_t *g, idmap_t *map, uint64_t *ecap, uint64_t *idcap, uint64_t a, uint64_t b)
{
    int64_t da = idmap_get(map, a, g->n);
    if (da == g->n)
        g->n++;
    int64_t db = da >= 0 ? idmap_get(map, b, g->n) : -1;
    if (db == g->n)
        g->n++;
    if (da < 0 || db < 0 || push_edge(g, ecap, (uint32_t)da, (uint32_t)db) != 0)
        return -1;
    if (g->n > *idcap) {
        uint64_t nc = *idcap ? *idcap * 2 : 4096;
        uint64_t *ni = realloc(g->orig_id, nc * sizeof *ni);
        if (!ni)
            return -1;
        g->orig_id = ni;
        *idcap = nc;
    }
    g->orig_id[da] = a;
    g->orig_id[db] = b;
    return 0;
}

int gb_graph_parse_snap(const char *text, size_t len, const char *name, gb_graph_t **out, char *err,
                        size_t errlen)
{
    *out = NULL;
    gb_graph_t *g = calloc(1, sizeof *g);
    idmap_t map = {.salt = idmap_salt()};
    uint64_t ecap = 0, idcap = 0, line = 0;
    const char *p = text, *end = text + len;
    int rc = 0;
    if (!g) {
        snprintf(err, errlen, "%s: out of memory", name);
        return -1;
    }
    if (len >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0) /* a UTF-8 byte order mark */
        p += 3;
    while (p < end && rc == 0) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        line++;
        const char *s = p, *t;
        while (s < eol && (*s == ' ' || *s == '\t'))
            s++;
        for (t = s; t < eol && (*t == ' ' || *t == '\t' || *t == '\r');)
            t++; /* a blank line of a \r\n file; a \r before the ids is parse_edge's error */
        uint64_t a = 0, b = 0;
        char why[256], shown[4 * 40 + 8];
        const bool skip = t == eol || *s == '#' || *s == '%'; /* '%': KONECT and Matrix Market comments */
        /* A NUL on any line, comments included; an edge line's shows only
         * when it fails to parse, which it then does, off the hot path. */
        const char *nul = NULL;
        if (skip ? (nul = memchr(p, '\0', (size_t)(eol - p))) != NULL
                 : parse_edge(s, eol, &a, &b, why, sizeof why) != 0) {
            if (!skip)
                nul = memchr(p, '\0', (size_t)(eol - p));
            excerpt(shown, sizeof shown, p, eol);
            if (nul)
                snprintf(err, errlen, "%s:%llu: a NUL byte at column %llu (not a text edge list?); the line "
                         "starts '%s'", name, (unsigned long long)line, (unsigned long long)(nul - p + 1), shown);
            else
                snprintf(err, errlen, "%s:%llu: %s (the line: '%s')", name, (unsigned long long)line, why, shown);
            rc = -1;
        } else if (skip) {
        } else if (add_edge(g, &map, &ecap, &idcap, a, b) != 0) {
            snprintf(err, errlen, "%s:%llu: out of memory or too many vertices (at most %u)", name,
                     (unsigned long long)line, GB_GRAPH_MAX_VERTICES);
            rc = -1;
        }
        p = eol < end ? eol + 1 : end;
    }
    free(map.keys);
    free(map.vals);
    if (rc == 0 && g->m == 0) {
        snprintf(err, errlen, "%s: no edges (only comments and blank lines; an edge is a line 'source target')", name);
        rc = -1;
    }
    if (rc != 0) {
        gb_graph_destroy(&g);
        return -1;
    }
    *out = g;
    return 0;
}

int gb_graph_load_snap(const char *path, gb_graph_t **out, char *err, size_t errlen)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(f);
        snprintf(err, errlen, "%s: is a directory (give an edge-list file)", path);
        return -1;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0, line_start = 0; /* where the last line read so far starts */
    size_t line = 1;                          /* its number */
    for (;;) {
        if (len == cap) {
            size_t nc = cap ? cap * 2 : (1u << 20);
            char *nb = realloc(buf, nc);
            if (!nb) {
                free(buf);
                fclose(f);
                snprintf(err, errlen, "%s: out of memory", path);
                return -1;
            }
            buf = nb;
            cap = nc;
        }
        errno = 0;
        size_t r = fread(buf + len, 1, cap - len, f);
        if (r && memchr(buf + len, '\0', r)) {
            /* Not text: the parser names the line of its first NUL, and an
             * endless input (/dev/urandom) is not read on until memory ends. */
            len += r;
            break;
        }
        /* Every line that ended in this read, then the one still open: each
         * at most GB_GRAPH_MAX_LINE (/dev/zero, a binary file: fail before
         * memory does). */
        bool too_long = false;
        for (const char *nl = buf + len; !too_long && (nl = memchr(nl, '\n', (size_t)(buf + len + r - nl))) != NULL;
             nl++) {
            const size_t n = (size_t)(nl - buf) - line_start;
            too_long = n - (n > 0 && nl[-1] == '\r') > GB_GRAPH_MAX_LINE; /* a CRLF line as long as an LF one */
            if (!too_long) {
                line_start = (size_t)(nl - buf) + 1;
                line++;
            }
        }
        len += r;
        if (r == 0 && !too_long)
            break;
        if (too_long || len - line_start > GB_GRAPH_MAX_LINE) {
            free(buf);
            fclose(f);
            snprintf(err, errlen, "%s:%zu: a line longer than %u MiB (not a text edge list?)", path, line,
                     GB_GRAPH_MAX_LINE >> 20);
            return -1;
        }
    }
    int bad = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (bad) {
        free(buf);
        snprintf(err, errlen, "%s: read error: %s", path, strerror(bad));
        return -1;
    }
    int rc = gb_graph_parse_snap(buf, len, path, out, err, errlen);
    free(buf);
    return rc;
}

/* splitmix64: small, fast, and the same on every platform (deterministic graphs). */
static uint64_t next_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double next_unit(uint64_t *s) { return (double)(next_rand(s) >> 11) * (1.0 / 9007199254740992.0); }

int gb_graph_kronecker(unsigned scale, unsigned edgefactor, uint64_t seed, gb_graph_t **out, char *err,
                       size_t errlen)
{
    *out = NULL;
    if (scale < 1 || scale > 30 || edgefactor < 1 || edgefactor > 1024) {
        snprintf(err, errlen, "kronecker: scale must be 1..30 and edgefactor 1..1024 (got %u, %u)", scale,
                 edgefactor);
        return -1;
    }
    gb_graph_t *g = calloc(1, sizeof *g);
    uint32_t *perm = NULL;
    if (!g)
        goto nomem;
    g->n = 1u << scale;
    g->m = (uint64_t)edgefactor << scale;
    g->src = malloc(g->m * sizeof *g->src);
    g->dst = malloc(g->m * sizeof *g->dst);
    g->orig_id = malloc((size_t)g->n * sizeof *g->orig_id);
    perm = malloc((size_t)g->n * sizeof *perm);
    if (!g->src || !g->dst || !g->orig_id || !perm)
        goto nomem;
    uint64_t rs = seed;
    /* Vertex labels are permuted so that degree does not follow the id. */
    for (uint32_t i = 0; i < g->n; i++)
        perm[i] = i;
    for (uint32_t i = g->n - 1; i > 0; i--) {
        uint32_t j = (uint32_t)(next_rand(&rs) % (i + 1));
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    const double a = 0.57, b = 0.19, c = 0.19, ab = a + b, abc = a + b + c;
    for (uint64_t e = 0; e < g->m; e++) {
        uint32_t s = 0, d = 0;
        for (unsigned l = 0; l < scale; l++) {
            double r = next_unit(&rs);
            unsigned si = r >= ab, di = (r >= a && r < ab) || r >= abc;
            s = (s << 1) | si;
            d = (d << 1) | di;
        }
        g->src[e] = perm[s];
        g->dst[e] = perm[d];
    }
    for (uint32_t i = 0; i < g->n; i++)
        g->orig_id[i] = i;
    free(perm);
    *out = g;
    return 0;
nomem:
    free(perm);
    gb_graph_destroy(&g);
    snprintf(err, errlen, "kronecker: out of memory for scale %u", scale);
    return -1;
}

int gb_graph_csr(gb_graph_t *g)
{
    free(g->row);
    free(g->col);
    g->row = calloc((size_t)g->n + 1, sizeof *g->row);
    g->col = malloc((g->m ? g->m : 1) * sizeof *g->col);
    if (!g->row || !g->col)
        return -1;
    for (uint64_t e = 0; e < g->m; e++)
        g->row[g->src[e] + 1]++;
    for (uint32_t v = 0; v < g->n; v++)
        g->row[v + 1] += g->row[v];
    uint64_t *fill = malloc(((size_t)g->n + 1) * sizeof *fill);
    if (!fill)
        return -1;
    memcpy(fill, g->row, ((size_t)g->n + 1) * sizeof *fill);
    for (uint64_t e = 0; e < g->m; e++) /* stable: targets keep their input order */
        g->col[fill[g->src[e]]++] = g->dst[e];
    free(fill);
    return 0;
}

void gb_pull_free(gb_pull_t *p)
{
    free(p->in_off);
    free(p->in_src);
    free(p->outdeg);
    memset(p, 0, sizeof *p);
}

int gb_graph_pull(gb_graph_t *g, gb_pull_t *out)
{
    memset(out, 0, sizeof *out);
    if (!g->row && gb_graph_csr(g) != 0)
        return -1;
    const uint32_t n = g->n;
    out->n = n;
    out->in_off = calloc((size_t)n + 1, sizeof *out->in_off);
    out->in_src = malloc((g->m ? g->m : 1) * sizeof *out->in_src);
    out->outdeg = calloc(n ? n : 1, sizeof *out->outdeg);
    uint64_t *fill = malloc(((size_t)n + 1) * sizeof *fill);
    if (!out->in_off || !out->in_src || !out->outdeg || !fill) {
        free(fill);
        gb_pull_free(out);
        return -1;
    }
    for (uint64_t e = 0; e < g->m; e++)
        out->in_off[g->col[e] + 1]++;
    for (uint32_t v = 0; v < n; v++)
        out->in_off[v + 1] += out->in_off[v];
    memcpy(fill, out->in_off, ((size_t)n + 1) * sizeof *fill);
    /* Sources in ascending order (the CSR walks them so), so a duplicate edge
     * lands right after its twin in the target's bucket. */
    for (uint32_t u = 0; u < n; u++)
        for (uint64_t e = g->row[u]; e < g->row[u + 1]; e++)
            out->in_src[fill[g->col[e]]++] = u;
    free(fill);
    uint64_t w = 0;
    for (uint32_t v = 0; v < n; v++) {
        const uint64_t b = out->in_off[v], end = out->in_off[v + 1];
        out->in_off[v] = w;
        for (uint64_t e = b; e < end; e++) {
            const uint32_t u = out->in_src[e];
            if (e > b && u == out->in_src[e - 1])
                continue; /* duplicate of the previous edge */
            out->in_src[w++] = u;
            out->outdeg[u]++;
        }
    }
    out->in_off[n] = w;
    out->m = w;
    return 0;
}
