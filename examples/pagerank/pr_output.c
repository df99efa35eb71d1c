#include "pr_output.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* Takes o->tmp out of o before it is freed: pr_out_unlink_tmp, from a
 * signal handler, sees it or NULL, never a freed string. */
static char *take_tmp(pr_out_t *o)
{
    char *t = o->tmp;
    o->tmp = NULL;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    return t;
}

/* The stream of stdout or stderr when path names the file it writes (such
 * as /dev/stdout with stdout redirected to a file): opened again, the path
 * would be truncated and written from its start, under what the stream
 * writes. NULL otherwise. */
static FILE *std_stream_of(const char *path)
{
    struct stat ps, fs;
    if (stat(path, &ps) != 0)
        return NULL;
    if (fstat(STDOUT_FILENO, &fs) == 0 && fs.st_dev == ps.st_dev && fs.st_ino == ps.st_ino)
        return stdout;
    if (fstat(STDERR_FILENO, &fs) == 0 && fs.st_dev == ps.st_dev && fs.st_ino == ps.st_ino)
        return stderr;
    return NULL;
}

int pr_out_open(pr_out_t *o, const char *path, bool binary)
{
    *o = (pr_out_t){.path = path};
    if (!path)
        return 0;
    if ((o->f = std_stream_of(path))) {
        o->shared = true;
        return 0;
    }
    struct stat sb;
    int e = 0;
    if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fprintf(stderr, PROG ": %s: is a directory (give a file to write)\n", path);
        return -1;
    }
    if (lstat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        o->f = fopen(path, binary ? "wb" : "w");
        e = errno;
    } else {
        const size_t len = strlen(path) + sizeof ".tmp.XXXXXX";
        char *t = malloc(len);
        const int fd = t ? (snprintf(t, len, "%s.tmp.XXXXXX", path), mkstemp(t)) : -1;
        e = t ? errno : ENOMEM;
        if (fd < 0) {
            free(t);
        } else { /* named only once it exists, for pr_out_unlink_tmp */
            __atomic_signal_fence(__ATOMIC_SEQ_CST);
            o->tmp = t;
            const mode_t mask = umask(0); /* the mode a plain fopen would give */
            umask(mask);
            if (fchmod(fd, 0666 & ~mask) != 0 || !(o->f = fdopen(fd, binary ? "wb" : "w"))) {
                e = errno;
                close(fd);
                unlink(o->tmp);
            }
        }
    }
    if (!o->f) {
        fprintf(stderr, PROG ": %s: cannot write: %s\n", path, strerror(e));
        free(take_tmp(o));
        return -1;
    }
    return 0;
}

void pr_out_unlink_tmp(const pr_out_t *o)
{
    const char *t = o->tmp;
    if (t)
        unlink(t);
}

void pr_out_drop(pr_out_t *o)
{
    if (o->pending) /* written, never put in place */
        unlink(o->tmp);
    if (o->f && o->shared) {
        fflush(o->f);
    } else if (o->f) {
        fclose(o->f);
        if (o->tmp)
            unlink(o->tmp);
    }
    free(take_tmp(o));
    *o = (pr_out_t){0};
}

volatile sig_atomic_t pr_out_cancelled;

int pr_out_close(pr_out_t *o, bool ok)
{
    if (!o->f)
        return 0;
    int e = ok ? 0 : errno;
    if (ok && fflush(o->f) != 0)
        e = errno;
    if (!o->shared && fclose(o->f) != 0 && !e)
        e = errno;
    o->f = NULL;
    if (e || !ok) {
        fprintf(stderr, PROG ": %s: write failed: %s%s\n", o->path, strerror(e ? e : EIO),
                o->tmp ? " (the file is left as it was)" : "");
        if (o->tmp)
            unlink(o->tmp);
        free(take_tmp(o));
        return -1;
    }
    o->pending = o->tmp != NULL;
    return 0;
}

int pr_out_place(pr_out_t *o)
{
    if (!o->pending)
        return 0;
    o->pending = false;
    int e = pr_out_cancelled ? EINTR : rename(o->tmp, o->path) != 0 ? errno : 0;
    if (e) {
        if (e != EINTR) /* a signal: the caller says so */
            fprintf(stderr, PROG ": %s: write failed: %s (the file is left as it was)\n", o->path, strerror(e));
        unlink(o->tmp);
    }
    free(take_tmp(o));
    return e ? -1 : 0;
}

int pr_out_commit(pr_out_t *o, bool ok)
{
    return pr_out_close(o, ok) != 0 ? -1 : pr_out_place(o);
}

int write_ranks(pr_out_t *o, const gb_graph_t *g, const double *ranks)
{
    bool ok = fprintf(o->f, "# vertex pagerank\n") > 0;
    for (uint32_t v = 0; v < g->n && ok; v++)
        ok = fprintf(o->f, "%" PRIu64 " %.9g\n", g->orig_id[v], ranks[v]) > 0;
    return pr_out_close(o, ok);
}

int write_edges(pr_out_t *o, const gb_graph_t *g)
{
    bool ok = fprintf(o->f, "# %u vertices, %" PRIu64 " edges (duplicates included; a vertex without edges is "
                                "not listed)\n", g->n,
                      g->m) > 0;
    for (uint64_t e = 0; e < g->m && ok; e++)
        ok = fprintf(o->f, "%" PRIu64 " %" PRIu64 "\n", g->orig_id[g->src[e]], g->orig_id[g->dst[e]]) > 0;
    return pr_out_commit(o, ok);
}

int write_csr(pr_out_t *o, const gb_pull_t *g)
{
    FILE *f = o->f;
    const uint64_t n = g->n, m = g->m;
    bool ok = fwrite("GBPRCSR1", 8, 1, f) == 1 && fwrite(&n, 8, 1, f) == 1 && fwrite(&m, 8, 1, f) == 1 &&
              fwrite(g->in_off, 8, n + 1, f) == n + 1 && (m == 0 || fwrite(g->in_src, 4, m, f) == m) &&
              fwrite(g->outdeg, 4, n, f) == n;
    return pr_out_commit(o, ok);
}

int write_ranks_bin(pr_out_t *o, const double *ranks, uint32_t n)
{
    return pr_out_close(o, fwrite(ranks, sizeof *ranks, n, o->f) == n);
}
