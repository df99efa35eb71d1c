/* Output of the PageRank driver: the top-k table and the files it writes on
 * request (ranks as text, the edge list for check_networkx.py, and the
 * binary CSR and ranks for bench/bench_pagerank.py). Each returns 0, or -1
 * after saying on stderr what went wrong. */
#ifndef GB_PR_OUTPUT_H
#define GB_PR_OUTPUT_H

#include <stdint.h>

#include "graph.h"

void print_top(const gb_graph_t *g, const double *ranks, uint32_t k);
int write_ranks(const char *path, const gb_graph_t *g, const double *ranks);
int write_edges(const char *path, const gb_graph_t *g);
/* 'GBPRCSR1', u64 n, u64 m, u64 in_off[n+1], u32 in_src[m], u32 outdeg[n]. */
int write_csr(const char *path, const gb_pull_t *g);

#endif
