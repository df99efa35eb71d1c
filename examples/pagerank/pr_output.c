#include "pr_output.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "pagerank"

/* ---- output ---------------------------------------------------------------- */

static const double *g_ranks;
static int by_rank_desc(const void *a, const void *b)
{
    double x = g_ranks[*(const uint32_t *)a], y = g_ranks[*(const uint32_t *)b];
    if (x != y)
        return x < y ? 1 : -1;
    return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

void print_top(const gb_graph_t *g, const double *ranks, uint32_t k)
{
    uint32_t n = g->n, *top = malloc((size_t)(k < n ? k : n) * sizeof *top), have = 0;
    if (!top || k == 0) {
        free(top);
        return;
    }
    if (k > n)
        k = n;
    /* keep the k best in a small sorted array: n log k without sorting all */
    g_ranks = ranks;
    for (uint32_t v = 0; v < n; v++) {
        if (have == k && by_rank_desc(&v, &top[k - 1]) > 0)
            continue;
        uint32_t i = have < k ? have++ : k - 1;
        while (i > 0 && by_rank_desc(&v, &top[i - 1]) < 0) {
            top[i] = top[i - 1];
            i--;
        }
        top[i] = v;
    }
    printf("top %u vertices:\n  %-6s %-20s %s\n", k, "rank", "vertex", "pagerank");
    for (uint32_t i = 0; i < k; i++)
        printf("  %-6u %-20" PRIu64 " %.9f\n", i + 1, g->orig_id[top[i]], ranks[top[i]]);
    free(top);
}

/* Opens path for writing, or says why not. */
static FILE *open_out(const char *path, const char *mode)
{
    FILE *f = fopen(path, mode);
    if (!f)
        fprintf(stderr, PROG ": %s: %s\n", path, strerror(errno));
    return f;
}

/* Closes f; ok is whether every write succeeded. Returns 0, or -1 (said). */
static int close_out(FILE *f, const char *path, bool ok)
{
    if (fclose(f) != 0 || !ok) {
        fprintf(stderr, PROG ": %s: write failed: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

int write_ranks(const char *path, const gb_graph_t *g, const double *ranks)
{
    FILE *f = open_out(path, "w");
    if (!f)
        return -1;
    bool ok = fprintf(f, "# vertex pagerank\n") > 0;
    for (uint32_t v = 0; v < g->n && ok; v++)
        ok = fprintf(f, "%" PRIu64 " %.9g\n", g->orig_id[v], ranks[v]) > 0;
    return close_out(f, path, ok);
}

int write_edges(const char *path, const gb_graph_t *g)
{
    FILE *f = open_out(path, "w");
    if (!f)
        return -1;
    bool ok = fprintf(f, "# %u vertices, %" PRIu64 " edges (as generated; duplicates included)\n", g->n, g->m) > 0;
    for (uint64_t e = 0; e < g->m && ok; e++)
        ok = fprintf(f, "%" PRIu64 " %" PRIu64 "\n", g->orig_id[g->src[e]], g->orig_id[g->dst[e]]) > 0;
    return close_out(f, path, ok);
}

int write_csr(const char *path, const gb_pull_t *g)
{
    FILE *f = open_out(path, "wb");
    if (!f)
        return -1;
    const uint64_t n = g->n, m = g->m;
    bool ok = fwrite("GBPRCSR1", 8, 1, f) == 1 && fwrite(&n, 8, 1, f) == 1 && fwrite(&m, 8, 1, f) == 1 &&
              fwrite(g->in_off, 8, n + 1, f) == n + 1 && (m == 0 || fwrite(g->in_src, 4, m, f) == m) &&
              fwrite(g->outdeg, 4, n, f) == n;
    return close_out(f, path, ok);
}
