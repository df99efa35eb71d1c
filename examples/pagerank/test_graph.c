/* The graph reader and generator: valid edge lists in their variety, every
 * malformed line reported with its line number, Kronecker determinism. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "graph.h"

static gb_graph_t *parse_ok(const char *text)
{
    gb_graph_t *g = NULL;
    char err[256] = "";
    if (gb_graph_parse_snap(text, strlen(text), "t.txt", &g, err, sizeof err) != 0)
        fail_msg("unexpected error: %s", err);
    return g;
}

static void parse_err(const char *text, const char *want)
{
    gb_graph_t *g = NULL;
    char err[256] = "";
    assert_int_equal(gb_graph_parse_snap(text, strlen(text), "t.txt", &g, err, sizeof err), -1);
    assert_null(g);
    if (!strstr(err, want))
        fail_msg("error '%s' does not contain '%s'", err, want);
}

static void test_valid(void **state)
{
    (void)state;
    gb_graph_t *g = parse_ok("# FromNodeId\tToNodeId\n\n10 20\r\n20\t10\n  30 30\n10 20\n"
                             "18446744073709551615 10\n% a KONECT-style comment\n# trailing comment");
    assert_int_equal(g->n, 4);
    assert_int_equal(g->m, 5); /* the duplicate and the self-loop are kept */
    assert_int_equal(g->orig_id[0], 10);
    assert_int_equal(g->orig_id[1], 20);
    assert_int_equal(g->orig_id[2], 30);
    assert_true(g->orig_id[3] == UINT64_MAX);
    assert_int_equal(g->src[2], 2);
    assert_int_equal(g->dst[2], 2);
    assert_int_equal(gb_graph_csr(g), 0);
    assert_int_equal(g->row[1] - g->row[0], 2); /* 10 -> 20 twice */
    assert_int_equal(g->row[4], 5);
    assert_int_equal(g->col[g->row[3]], 0);
    gb_graph_destroy(&g);
    assert_null(g);
    gb_graph_destroy(&g);
    /* A UTF-8 byte order mark (editors on Windows write one) is not part of the first id. */
    g = parse_ok("\xef\xbb\xbf" "7 8\r\n\r\n \t\r\n8 7\r\n"); /* blank \r\n lines too */
    assert_int_equal(g->n, 2);
    assert_int_equal(g->m, 2);
    assert_int_equal(g->orig_id[0], 7);
    gb_graph_destroy(&g);
}

static void test_malformed(void **state)
{
    (void)state;
    /* Each says what is wrong with the line, and shows it. */
    parse_err("1 2\n2 3\n1 2 3\n",
              "t.txt:3: expected two vertex ids 'source target' separated by blanks, found 3 fields (the line: '1 2 3')");
    parse_err("1 2 0.5\n", "t.txt:1: expected two vertex ids 'source target' separated by blanks, found 3 fields");
    parse_err("1 2 # why\n", "found 4 fields");
    parse_err("# c\na b\n", "t.txt:2: 'a' is not a vertex id (an unsigned decimal integer)");
    parse_err("1\n", "t.txt:1: expected two vertex ids 'source target' separated by blanks, found 1 field "
                     "(the line: '1')");
    parse_err("1 2\n-1 2\n", "t.txt:2: '-1' is negative: vertex ids are unsigned decimal integers");
    parse_err("1 2.5\n", "t.txt:1: '2.5' is not a vertex id");
    parse_err("1 0x10\n", "t.txt:1: '0x10' is not a vertex id");
    parse_err("1,2\n", "t.txt:1: expected two vertex ids 'source target' separated by blanks, found 1 field");
    parse_err("18446744073709551616 1\n", "t.txt:1: vertex id '18446744073709551616' is out of range (at most "
                                          "18446744073709551615)");
    parse_err("1 2\r3 4\r5 6\r", "t.txt:1: a carriage return before or between the ids");
    parse_err("\r1 2\n2 1\n", "t.txt:1: a carriage return before or between the ids");
    parse_err("1 2\n \t\r3 4\n", "t.txt:2: a carriage return before or between the ids");
    parse_err("# only comments\n\n", "t.txt: no edges");
    parse_err("", "t.txt: no edges");
    gb_graph_t *g = NULL;
    char err[256];
    assert_int_equal(gb_graph_load_snap("/nonexistent/graph.txt", &g, err, sizeof err), -1);
    assert_non_null(strstr(err, "No such file"));
    /* A directory is named as one, not "read error". */
    assert_int_equal(gb_graph_load_snap("/tmp", &g, err, sizeof err), -1);
    if (!strstr(err, "/tmp: is a directory"))
        fail_msg("directory: '%s'", err);
}

/* An endless input fails at once instead of being read until memory runs
 * out: /dev/zero at its first NUL byte, and an endless line of text once it
 * passes GB_GRAPH_MAX_LINE, naming the line (a FIFO fed by a child). */
static void test_endless_line(void **state)
{
    (void)state;
    gb_graph_t *g = NULL;
    char err[256] = "";
    assert_int_equal(gb_graph_load_snap("/dev/zero", &g, err, sizeof err), -1);
    assert_null(g);
    if (!strstr(err, "/dev/zero:1: a NUL byte at column 1"))
        fail_msg("/dev/zero: '%s'", err);
    char dir[] = "/tmp/gbgraph.XXXXXX", fifo[64];
    assert_non_null(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/endless", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { /* "1 2\n", then digits without end */
        signal(SIGPIPE, SIG_DFL);
        FILE *f = fopen(fifo, "w");
        static char digits[1 << 16];
        memset(digits, '7', sizeof digits);
        if (f && fputs("1 2\n", f) >= 0)
            while (fwrite(digits, 1, sizeof digits, f) == sizeof digits)
                ;
        _exit(0);
    }
    const int rc = gb_graph_load_snap(fifo, &g, err, sizeof err);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    unlink(fifo);
    rmdir(dir);
    assert_int_equal(rc, -1);
    if (!strstr(err, ":2: a line longer than 64 MiB"))
        fail_msg("endless line: '%s'", err);
}

/* A long line that ends within one read is refused as well, with its
 * number: a comment one byte over the bound, between two edges. */
static void test_long_line_ended(void **state)
{
    (void)state;
    char path[] = "/tmp/gb_test_graph_XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fputs("1 2\n#", f);
    char *fill = malloc(1u << 20);
    assert_non_null(fill);
    memset(fill, 'x', 1u << 20);
    for (int i = 0; i < (int)(GB_GRAPH_MAX_LINE >> 20); i++)
        assert_int_equal(fwrite(fill, 1, 1u << 20, f), 1u << 20);
    free(fill);
    fputs("\n2 3\n", f);
    assert_int_equal(fclose(f), 0);
    gb_graph_t *g = NULL;
    char err[256] = "", want[64];
    const int rc = gb_graph_load_snap(path, &g, err, sizeof err);
    unlink(path);
    assert_int_equal(rc, -1);
    assert_null(g);
    snprintf(want, sizeof want, ":2: a line longer than 64 MiB");
    if (!strstr(err, want))
        fail_msg("long comment line: '%s'", err);
}

/* Bytes a terminal would act on are shown escaped; a NUL is named as such
 * (the excerpt continues past it, so it is not mistaken for the line's end). */
static void test_binary_line(void **state)
{
    (void)state;
    gb_graph_t *g = NULL;
    char err[256] = "";
    const char bin[] = "1 2\n\x1b[2J\xff\xfe 3\n";
    assert_int_equal(gb_graph_parse_snap(bin, sizeof bin - 1, "t.txt", &g, err, sizeof err), -1);
    if (!strstr(err, "t.txt:2:") || !strstr(err, "'\\x1b[2J\\xff\\xfe 3'") || strchr(err, 0x1b))
        fail_msg("binary line: '%s'", err);
    const char nul[] = "1 2\n3 4\0 5\n";
    assert_int_equal(gb_graph_parse_snap(nul, sizeof nul - 1, "t.txt", &g, err, sizeof err), -1);
    if (!strstr(err, "t.txt:2: a NUL byte at column 4") || !strstr(err, "'3 4\\x00 5'"))
        fail_msg("NUL: '%s'", err);
    assert_null(g);
    /* in a comment too: the docs call any NUL an error */
    const char cnul[] = "# a\0b\n1 2\n";
    assert_int_equal(gb_graph_parse_snap(cnul, sizeof cnul - 1, "t.txt", &g, err, sizeof err), -1);
    if (!strstr(err, "t.txt:1: a NUL byte at column 4"))
        fail_msg("NUL in a comment: '%s'", err);
    assert_null(g);
}

static void test_kronecker(void **state)
{
    (void)state;
    gb_graph_t *a = NULL, *b = NULL, *c = NULL;
    char err[256];
    assert_int_equal(gb_graph_kronecker(10, 16, 7, &a, err, sizeof err), 0);
    assert_int_equal(gb_graph_kronecker(10, 16, 7, &b, err, sizeof err), 0);
    assert_int_equal(gb_graph_kronecker(10, 16, 8, &c, err, sizeof err), 0);
    assert_int_equal(a->n, 1024);
    assert_int_equal(a->m, 16 * 1024);
    assert_memory_equal(a->src, b->src, a->m * sizeof *a->src);
    assert_memory_equal(a->dst, b->dst, a->m * sizeof *a->dst);
    assert_true(memcmp(a->src, c->src, a->m * sizeof *a->src) != 0);
    for (uint64_t e = 0; e < a->m; e++)
        assert_true(a->src[e] < a->n && a->dst[e] < a->n);
    /* Skewed: R-MAT concentrates edges on few vertices. */
    assert_int_equal(gb_graph_csr(a), 0);
    uint64_t maxdeg = 0;
    for (uint32_t v = 0; v < a->n; v++)
        if (a->row[v + 1] - a->row[v] > maxdeg)
            maxdeg = a->row[v + 1] - a->row[v];
    assert_true(maxdeg > 10 * 16);
    gb_graph_destroy(&a);
    gb_graph_destroy(&b);
    gb_graph_destroy(&c);
    assert_int_equal(gb_graph_kronecker(0, 16, 1, &a, err, sizeof err), -1);
    assert_non_null(strstr(err, "scale"));
    assert_null(a);
}

/* networkx DiGraph semantics: duplicates merged, self-loops kept. */
static void test_pull(void **state)
{
    (void)state;
    const char text[] = "1 2\n1 2\n2 2\n3 1\n3 2\n2 1\n1 2\n4 4\n4 4\n";
    gb_graph_t *g = NULL;
    char err[256];
    assert_int_equal(gb_graph_parse_snap(text, sizeof text - 1, "t", &g, err, sizeof err), 0);
    gb_pull_t p;
    assert_int_equal(gb_graph_pull(g, &p), 0);
    /* dense ids in order of appearance: 1->0, 2->1, 3->2, 4->3 */
    assert_int_equal(p.n, 4);
    assert_int_equal(p.m, 6); /* 1-2, 2-2, 3-1, 3-2, 2-1, 4-4 */
    const uint32_t outdeg[] = {1, 2, 2, 1};
    assert_memory_equal(p.outdeg, outdeg, sizeof outdeg);
    const uint64_t off[] = {0, 2, 5, 5, 6};
    assert_memory_equal(p.in_off, off, sizeof off);
    const uint32_t src[] = {1, 2, 0, 1, 2, 3}; /* into 1: from 2, 3; into 2: from 1, 2, 3; into 4: 4 */
    assert_memory_equal(p.in_src, src, sizeof src);
    gb_pull_free(&p);
    gb_graph_destroy(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_endless_line),
        cmocka_unit_test(test_long_line_ended),
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_binary_line),
        cmocka_unit_test(test_kronecker),
        cmocka_unit_test(test_pull),
    };
    return cmocka_run_group_tests_name("graph", tests, NULL, NULL);
}
