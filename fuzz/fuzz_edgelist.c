/* libFuzzer target: the SNAP edge-list reader on arbitrary bytes. It must
 * accept (with consistent ids and CSR) or reject with a line-numbered
 * message, never crash or leak. */
#include <stdint.h>
#include <string.h>

#include "graph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size); /* libFuzzer's entry point */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gb_graph_t *g = NULL;
    char err[256] = "";
    if (gb_graph_parse_snap((const char *)data, size, "fuzz.txt", &g, err, sizeof err) != 0) {
        if (g || strncmp(err, "fuzz.txt:", 9) != 0)
            __builtin_trap(); /* an error must be reported against the input */
        return 0;
    }
    if (gb_graph_csr(g) != 0 || g->row[g->n] != g->m)
        __builtin_trap();
    for (uint64_t e = 0; e < g->m; e++)
        if (g->src[e] >= g->n || g->dst[e] >= g->n)
            __builtin_trap();
    gb_graph_destroy(&g);
    return 0;
}
