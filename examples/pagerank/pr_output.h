/* Output of the PageRank driver: the top-k table and the files it writes on
 * request (ranks as text, the edge list for check_networkx.py, and the
 * binary CSR and ranks for bench/bench_pagerank.py). Each returns 0, or -1
 * after saying on stderr what went wrong.
 *
 * A file is written whole or not at all: into a temporary file beside it,
 * renamed over the path once every byte is written (a write that fails, a
 * full disk or a run that fails leaves the path as it was). A path that is
 * not a regular file (/dev/stdout, a FIFO, a symbolic link) is written in
 * place. */
#ifndef GB_PR_OUTPUT_H
#define GB_PR_OUTPUT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "graph.h"

typedef struct pr_out {
    const char *path; /* NULL: not asked for */
    char *tmp;        /* the temporary file, NULL when written in place */
    FILE *f;          /* open until committed or dropped */
    bool shared;      /* f is stdout or stderr (the path names the file one of them writes) */
    bool pending;     /* written and closed, tmp not yet renamed over path (pr_out_place) */
} pr_out_t;

/* Opens the output for path (NULL: nothing to do, 0); binary: "wb". */
int pr_out_open(pr_out_t *o, const char *path, bool binary);
/* Closes it and, when ok (every write succeeded), renames it over its path;
 * else drops it. 0, or -1 (said). */
int pr_out_commit(pr_out_t *o, bool ok);
/* The two halves of pr_out_commit, so that several files are all written
 * before any is put in place: closes it (dropped unless ok), then renames it
 * over its path. 0, or -1 (said). */
int pr_out_close(pr_out_t *o, bool ok);
int pr_out_place(pr_out_t *o);
/* Set by a signal handler: pr_out_commit puts no file in place after it
 * (and says nothing; the caller reports the interruption). */
extern volatile sig_atomic_t pr_out_cancelled;
/* Drops it: closed, the temporary file removed (nothing when not open). */
void pr_out_drop(pr_out_t *o);
/* Removes its temporary file only: async-signal-safe, for a handler that
 * ends the process. */
void pr_out_unlink_tmp(const pr_out_t *o);

void print_top(const gb_graph_t *g, const double *ranks, uint32_t k);
/* write_ranks and write_ranks_bin close their file (pr_out_close): the
 * caller puts them in place (pr_out_place). */
int write_ranks(pr_out_t *o, const gb_graph_t *g, const double *ranks);
int write_edges(pr_out_t *o, const gb_graph_t *g);
/* 'GBPRCSR1', u64 n, u64 m, u64 in_off[n+1], u32 in_src[m], u32 outdeg[n]. */
int write_csr(pr_out_t *o, const gb_pull_t *g);
/* f64 ranks[n]. */
int write_ranks_bin(pr_out_t *o, const double *ranks, uint32_t n);

#endif
