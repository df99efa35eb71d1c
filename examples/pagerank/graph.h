/* Graphs for the PageRank example: a SNAP-style edge list reader and a
 * Graph500 Kronecker generator, both producing the same compact form (dense
 * vertex ids, an edge array, CSR by source). Edges are kept as given,
 * self-loops and duplicates included; matching networkx's semantics (a
 * DiGraph merges duplicates) is the PageRank driver's decision. */
#ifndef GB_GRAPH_H
#define GB_GRAPH_H

#include <stddef.h>
#include <stdint.h>

typedef struct gb_graph {
    uint32_t n;          /* vertices, dense ids 0..n-1 */
    uint64_t m;          /* edges */
    uint32_t *src, *dst; /* m edges */
    uint64_t *orig_id;   /* n: the id each vertex had in the input (identity for generated graphs) */
    uint64_t *row;       /* n + 1: CSR offsets by source (after gb_graph_csr) */
    uint32_t *col;       /* m: targets, grouped by source */
} gb_graph_t;

/* Reads a SNAP-style edge list: '#' (or '%') comments, blank lines, lines of two
 * unsigned decimal ids separated by spaces or tabs (any values up to 2^64 - 1;
 * they are renumbered densely in order of first appearance); \n or \r\n line
 * ends, blanks around the ids, a UTF-8 byte order mark. Returns 0, or -1 with
 * "path:line: what is wrong (the line: '...')" in err. */
/* The longest line gb_graph_load_snap reads: a longer one (a binary file,
 * /dev/zero) is an error as soon as it is seen, not after memory ran out. */
#define GB_GRAPH_MAX_LINE (64u << 20)
/* Distinct vertices an edge list may name: dense ids 0 .. 2^32 - 3, so that
 * a vertex count and UINT32_MAX as "no vertex" both fit 32 bits. */
#define GB_GRAPH_MAX_VERTICES (UINT32_MAX - 1u)

int gb_graph_load_snap(const char *path, gb_graph_t **out, char *err, size_t errlen);
/* The same from memory (name is used in messages). */
int gb_graph_parse_snap(const char *text, size_t len, const char *name, gb_graph_t **out, char *err,
                        size_t errlen);

/* Graph500 Kronecker generator (R-MAT a=0.57, b=0.19, c=0.19): 2^scale
 * vertices, edgefactor * 2^scale edges, vertex labels permuted, deterministic
 * for a seed. Returns 0 or -1 (scale 1..30, edgefactor 1..1024). */
int gb_graph_kronecker(unsigned scale, unsigned edgefactor, uint64_t seed, gb_graph_t **out, char *err,
                       size_t errlen);

/* Builds row/col (CSR by source). Returns 0 or -1 (out of memory). */
int gb_graph_csr(gb_graph_t *g);

void gb_graph_destroy(gb_graph_t **g);

/* The graph as PageRank pulls it, with networkx's DiGraph semantics:
 * duplicate edges merged into one, self-loops kept. In-edges in CSR form by
 * target (in_src[in_off[v] .. in_off[v+1]) are v's in-neighbours, ascending)
 * and the out-degree of each vertex after merging. */
typedef struct gb_pull {
    uint32_t n;
    uint64_t m;        /* edges after merging duplicates */
    uint64_t *in_off;  /* n + 1 */
    uint32_t *in_src;  /* m */
    uint32_t *outdeg;  /* n */
} gb_pull_t;

/* Builds *out from g (computing g's CSR first if needed). Returns 0 or -1
 * (out of memory; *out is then empty). */
int gb_graph_pull(gb_graph_t *g, gb_pull_t *out);
void gb_pull_free(gb_pull_t *p);

#endif
