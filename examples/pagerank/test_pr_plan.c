/* The driver's placement of a job's partitions (pr_plan): keys unique,
 * every partition's key on the device and worker block it was meant for,
 * each device's edges counted and its partitions' offsets made relative to
 * them, the first partition on each device leading it; and on one device
 * the plain job << 32 | q. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "pr_client.h"

/* n vertices, vertex v with v % 5 in-edges (from vertex 0). */
static gb_pull_t graph(uint32_t n)
{
    gb_pull_t g = {n, 0, calloc(n + 1, sizeof(uint64_t)), NULL, calloc(n, sizeof(uint32_t))};
    for (uint32_t v = 0; v < n; v++)
        g.in_off[v + 1] = g.in_off[v] + v % 5;
    g.m = g.in_off[n];
    g.in_src = calloc(g.m ? g.m : 1, sizeof(uint32_t));
    return g;
}

static void check(uint32_t devs, uint32_t lanes, uint32_t parts, bool first_device)
{
    gb_pull_t g = graph(1000);
    uint64_t *first = pr_partition(&g, parts);
    pr_opts_t o = {.first_device = first_device};
    pr_t p = {.o = &o, .n_devs = devs, .lanes = lanes, .job = 0x9e37u};
    p.key = calloc(parts, sizeof *p.key);
    p.shift = calloc(parts, sizeof *p.shift);
    assert_int_equal(pr_plan(&p, &g, first, parts), 0);
    const uint32_t used = first_device ? 1 : devs;
    uint64_t edges[GBC_MAX_DEVICES] = {0};
    for (uint32_t q = 0; q < parts; q++) {
        const uint32_t d = q % used;
        assert_int_equal(p.key[q] >> 32, p.job);
        if (devs == 1)
            assert_int_equal(p.key[q], (uint64_t)p.job << 32 | q);
        assert_int_equal(gbc_device_of_key(p.key[q], devs), d);
        if (lanes && devs > 1) /* each device's blocks in turn */
            assert_int_equal(p.key[q] % lanes, (q / used) % lanes);
        else if (lanes) /* consecutive keys: the blocks in turn all the same */
            assert_int_equal(p.key[q] % lanes, (p.key[0] + q) % lanes);
        for (uint32_t r = 0; r < q; r++)
            assert_true(p.key[r] != p.key[q]);
        if (p.lead[d] == q)
            assert_int_equal(edges[d], 0); /* a device's first partition leads it */
        assert_true(p.lead[d] <= q);
        /* its edges start where the device's earlier partitions' end */
        assert_int_equal((int64_t)g.in_off[first[q]] + p.shift[q], (int64_t)edges[d]);
        edges[d] += g.in_off[first[q + 1]] - g.in_off[first[q]];
    }
    uint64_t total = 0;
    for (uint32_t d = 0; d < GBC_MAX_DEVICES; d++) {
        assert_int_equal(p.m_dev[d], edges[d]);
        total += p.m_dev[d];
        if (d >= used || d >= parts)
            assert_int_equal(p.lead[d], UINT32_MAX); /* no partition there: no GraphInit */
    }
    assert_int_equal(total, g.m);
    free(p.key);
    free(p.shift);
    free(first);
    gb_pull_free(&g);
}

static void test_one_device(void **state)
{
    (void)state;
    check(1, 129, 129, false);
    check(1, 0, 4, false);
}

static void test_two_devices(void **state)
{
    (void)state;
    check(2, 129, 258, false);
    check(2, 1, 8, false);   /* cpu: one lane */
    check(2, 129, 1, false); /* fewer partitions than devices: device 1 gets none */
    check(2, 129, 129, true);
}

static void test_eight_devices(void **state)
{
    (void)state;
    check(8, 132, 8 * 132, false);
    check(3, 7, 50, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_device),
        cmocka_unit_test(test_two_devices),
        cmocka_unit_test(test_eight_devices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
