/* Detection and mode selection: fake filesystem roots, hand-filled facts for
 * every rule, the precedence --mode > GPUBRIDGE_MODE > host entry > config mode,
 * host patterns, bad mode names, and the CUDA probe on whatever machine runs it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "detect.h"

/* ---- fake roots ---------------------------------------------------------- */

typedef struct fake_root {
    char dir[256];
} fake_root;

static void mkdir_p(const char *root, const char *rel)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            assert_true(mkdir(path, 0755) == 0 || errno == EEXIST);
            *p = '/';
        }
    }
    assert_true(mkdir(path, 0755) == 0 || errno == EEXIST);
}

static void write_file(const char *root, const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

/* osrelease NULL: no file; hostname NULL: no file. */
static void fake_root_make(fake_root *r, bool dxg, const char *osrelease, const char *hostname)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(r->dir, sizeof r->dir, "%s/gb_detect_XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    assert_non_null(mkdtemp(r->dir));
    mkdir_p(r->dir, "dev");
    mkdir_p(r->dir, "proc/sys/kernel");
    if (dxg)
        write_file(r->dir, "dev/dxg", "");
    if (osrelease)
        write_file(r->dir, "proc/sys/kernel/osrelease", osrelease);
    if (hostname)
        write_file(r->dir, "proc/sys/kernel/hostname", hostname);
}

static void rm_rel(const char *root, const char *rel, bool dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    if (dir)
        rmdir(path);
    else
        unlink(path);
}

static void fake_root_remove(fake_root *r)
{
    rm_rel(r->dir, "dev/dxg", false);
    rm_rel(r->dir, "proc/sys/kernel/osrelease", false);
    rm_rel(r->dir, "proc/sys/kernel/hostname", false);
    rm_rel(r->dir, "proc/sys/kernel", true);
    rm_rel(r->dir, "proc/sys", true);
    rm_rel(r->dir, "proc", true);
    rm_rel(r->dir, "dev", true);
    assert_int_equal(rmdir(r->dir), 0);
}

static gb_facts_t detect_in(bool dxg, const char *osrelease, const char *hostname)
{
    fake_root r;
    fake_root_make(&r, dxg, osrelease, hostname);
    gb_facts_t f;
    gb_facts_init(&f);
    assert_int_equal(gb_detect_fs(r.dir, &f), GB_OK);
    fake_root_remove(&r);
    return f;
}

/* ---- filesystem facts ---------------------------------------------------- */

static void test_fs_native(void **state)
{
    (void)state;
    gb_facts_t f = detect_in(false, "6.1.0-18-amd64\n", "gpu-node-1\n");
    assert_string_equal(f.osrelease, "6.1.0-18-amd64");
    assert_string_equal(f.hostname, "gpu-node-1");
    assert_false(f.dev_dxg);
    assert_false(f.wsl2);
    assert_false(f.wsl1);
    assert_string_equal(f.wsl2_why, "");
}

static void test_fs_wsl2_current(void **state)
{
    (void)state;
    gb_facts_t f = detect_in(false, "5.15.153.1-microsoft-standard-WSL2\n", "box");
    assert_true(f.wsl2);
    assert_false(f.wsl1);
    assert_non_null(strstr(f.wsl2_why, "osrelease contains 'WSL2'"));
    assert_non_null(strstr(f.wsl2_why, "microsoft-standard"));
    assert_null(strstr(f.wsl2_why, "/dev/dxg"));
}

static void test_fs_wsl2_older(void **state)
{
    (void)state;
    gb_facts_t f = detect_in(false, "4.19.128-microsoft-standard\n", "box");
    assert_true(f.wsl2);
    assert_false(f.wsl1);
    assert_string_equal(f.wsl2_why, "osrelease contains 'microsoft-standard'");
}

static void test_fs_wsl1(void **state)
{
    (void)state;
    gb_facts_t f = detect_in(false, "4.4.0-19041-Microsoft\n", "box");
    assert_true(f.wsl1);
    assert_false(f.wsl2);
    assert_non_null(strstr(f.wsl1_why, "microsoft"));
}

static void test_fs_mixed_case(void **state)
{
    (void)state;
    gb_facts_t f = detect_in(false, "5.15.0-MicroSoft-STANDARD-wsl2", "box");
    assert_true(f.wsl2);
    assert_false(f.wsl1);
    f = detect_in(false, "4.4.0-17763-MICROSOFT", "box");
    assert_true(f.wsl1);
    assert_false(f.wsl2);
    f = detect_in(false, "4.4.0-17763-microsoft", "box");
    assert_true(f.wsl1);
    /* A custom WSL2 kernel that kept only "wsl" in its name. */
    f = detect_in(false, "6.6.0-custom-Wsl", "box");
    assert_true(f.wsl2);
    assert_string_equal(f.wsl2_why, "osrelease contains 'WSL'");
}

static void test_fs_dxg(void **state)
{
    (void)state;
    /* /dev/dxg alone is enough: a distribution kernel with GPU paravirtualisation. */
    gb_facts_t f = detect_in(true, "6.1.0-18-amd64", "box");
    assert_true(f.dev_dxg);
    assert_true(f.wsl2);
    assert_string_equal(f.wsl2_why, "/dev/dxg present");
    /* /dev/dxg outweighs a WSL1-looking osrelease (WSL1 has no /dev/dxg). */
    f = detect_in(true, "4.4.0-19041-Microsoft", "box");
    assert_true(f.wsl2);
    assert_false(f.wsl1);
    /* Both pieces of evidence are listed. */
    f = detect_in(true, "5.15.153.1-microsoft-standard-WSL2", "box");
    assert_true(f.wsl2);
    assert_non_null(strstr(f.wsl2_why, "/dev/dxg present, osrelease contains"));
}

static void test_fs_missing_files(void **state)
{
    (void)state;
    gb_facts_t f = detect_in(false, NULL, NULL);
    assert_string_equal(f.osrelease, "");
    assert_string_equal(f.hostname, "");
    assert_false(f.wsl1);
    assert_false(f.wsl2);
    f = detect_in(true, NULL, NULL);
    assert_true(f.wsl2);
    assert_string_equal(f.wsl2_why, "/dev/dxg present");
    /* An empty osrelease file. */
    f = detect_in(false, "", "h");
    assert_string_equal(f.osrelease, "");
    assert_false(f.wsl1 || f.wsl2);

    /* A root that does not exist at all is just "nothing found". */
    gb_facts_init(&f);
    assert_int_equal(gb_detect_fs("/nonexistent/gb_detect_root", &f), GB_OK);
    assert_false(f.dev_dxg || f.wsl1 || f.wsl2);
    assert_string_equal(f.osrelease, "");
    assert_string_equal(f.hostname, "");

    assert_int_equal(gb_detect_fs(NULL, &f), GB_ERR_INVALID);
    assert_int_equal(gb_detect_fs("/", NULL), GB_ERR_INVALID);
}

static void test_fs_trailing_slash(void **state)
{
    (void)state;
    fake_root r;
    fake_root_make(&r, true, "4.19.128-microsoft-standard", "h1");
    char root[300];
    snprintf(root, sizeof root, "%s//", r.dir);
    gb_facts_t f;
    gb_facts_init(&f);
    assert_int_equal(gb_detect_fs(root, &f), GB_OK);
    assert_true(f.dev_dxg);
    assert_string_equal(f.hostname, "h1");
    fake_root_remove(&r);
}

static void test_fs_real_root(void **state)
{
    (void)state;
    gb_facts_t f;
    gb_facts_init(&f);
    assert_int_equal(gb_detect_fs("/", &f), GB_OK);
    char host[256] = "";
    assert_int_equal(gethostname(host, sizeof host), 0);
    host[sizeof host - 1] = '\0';
    assert_string_equal(f.hostname, host);
    assert_false(f.wsl1 && f.wsl2);
}

/* ---- decision rules ------------------------------------------------------ */

/* A native Linux GPU host on which every rule passes: persistent. */
static gb_facts_t good_facts(void)
{
    gb_facts_t f;
    gb_facts_init(&f);
    snprintf(f.hostname, sizeof f.hostname, "gpu-node-1");
    snprintf(f.osrelease, sizeof f.osrelease, "6.1.0-18-amd64");
    f.cuda_built = true;
    f.cuda_device_count = 1;
    f.device = 0;
    snprintf(f.device_name, sizeof f.device_name, "NVIDIA H100 80GB HBM3");
    f.cc_major = 9;
    f.cc_minor = 0;
    f.can_map_host_memory = true;
    f.mapped_pinned_ok = true;
    f.concurrent_managed_access = true;
    f.cooperative_launch = true;
    return f;
}

static void set_wsl2(gb_facts_t *f)
{
    snprintf(f->osrelease, sizeof f->osrelease, "5.15.153.1-microsoft-standard-WSL2");
    f->dev_dxg = true;
    gb_detect_classify_os(f);
}

static void set_wsl1(gb_facts_t *f)
{
    snprintf(f->osrelease, sizeof f->osrelease, "4.4.0-19041-Microsoft");
    f->dev_dxg = false;
    gb_detect_classify_os(f);
}

static gb_decision_t decide(const gb_facts_t *f)
{
    gb_decision_t d;
    gb_detect_decide(f, &d);
    return d;
}

static void test_rule_native(void **state)
{
    (void)state;
    gb_facts_t f = good_facts();
    gb_decision_t d = decide(&f);
    assert_int_equal(d.mode, GB_MODE_PERSISTENT);
    assert_int_equal(d.rule, GB_RULE_NATIVE);
    assert_string_equal(gb_rule_name(d.rule), "native");
    assert_true(strlen(d.why) > 0);
}

static void test_rule_no_device(void **state)
{
    (void)state;
    gb_facts_t f = good_facts();
    f.cuda_device_count = 0;
    snprintf(f.cuda_error, sizeof f.cuda_error, "cudaGetDeviceCount: cudaErrorNoDevice");
    gb_decision_t d = decide(&f);
    assert_int_equal(d.mode, GB_MODE_CPU);
    assert_int_equal(d.rule, GB_RULE_NO_DEVICE);
    assert_non_null(strstr(d.why, "no CUDA device"));
    assert_non_null(strstr(d.why, "cudaErrorNoDevice"));

    /* The configured index is beyond the devices present. */
    f = good_facts();
    f.cuda_device_count = 2;
    f.device = 3;
    d = decide(&f);
    assert_int_equal(d.mode, GB_MODE_CPU);
    assert_int_equal(d.rule, GB_RULE_NO_DEVICE);
    assert_non_null(strstr(d.why, "device 3 is not present"));
    f.device = -1;
    assert_int_equal(decide(&f).rule, GB_RULE_NO_DEVICE);

    /* No device beats WSL2: nothing to relaunch on. */
    f = good_facts();
    set_wsl2(&f);
    f.cuda_device_count = 0;
    d = decide(&f);
    assert_int_equal(d.mode, GB_MODE_CPU);
    assert_int_equal(d.rule, GB_RULE_NO_DEVICE);

    /* Freshly initialised facts (nothing probed) mean cpu. */
    gb_facts_init(&f);
    assert_int_equal(decide(&f).mode, GB_MODE_CPU);
}

static void test_rule_wsl2(void **state)
{
    (void)state;
    gb_facts_t f = good_facts();
    set_wsl2(&f);
    gb_decision_t d = decide(&f);
    assert_int_equal(d.mode, GB_MODE_RELAUNCH);
    assert_int_equal(d.rule, GB_RULE_WSL2);
    assert_non_null(strstr(d.why, "/dev/dxg present"));
    /* WSL2 is reported before the watchdog and the pinned probe. */
    f.kernel_exec_timeout = true;
    f.mapped_pinned_ok = false;
    assert_int_equal(decide(&f).rule, GB_RULE_WSL2);
}

static void test_rule_wsl1(void **state)
{
    (void)state;
    gb_facts_t f = good_facts();
    f.cuda_device_count = 0;
    set_wsl1(&f);
    gb_decision_t d = decide(&f);
    assert_int_equal(d.mode, GB_MODE_CPU);
    assert_int_equal(d.rule, GB_RULE_WSL1);
    assert_non_null(strstr(d.why, "WSL1 has no GPU access"));
    assert_non_null(strstr(d.why, "4.4.0-19041-Microsoft"));
    assert_non_null(strstr(d.why, "wsl --set-version"));
    /* Even with (impossible) devices reported, WSL1 stays cpu. */
    f.cuda_device_count = 1;
    assert_int_equal(decide(&f).mode, GB_MODE_CPU);
}

static void test_rule_watchdog(void **state)
{
    (void)state;
    gb_facts_t f = good_facts();
    f.kernel_exec_timeout = true;
    gb_decision_t d = decide(&f);
    assert_int_equal(d.mode, GB_MODE_RELAUNCH);
    assert_int_equal(d.rule, GB_RULE_WATCHDOG);
    assert_non_null(strstr(d.why, "display watchdog"));
    /* The watchdog is reported before the pinned probe. */
    f.mapped_pinned_ok = false;
    assert_int_equal(decide(&f).rule, GB_RULE_WATCHDOG);
}

static void test_rule_no_mapped_pinned(void **state)
{
    (void)state;
    gb_facts_t f = good_facts();
    f.mapped_pinned_ok = false;
    snprintf(f.mapped_pinned_why, sizeof f.mapped_pinned_why,
             "cudaHostAlloc(4 KiB, cudaHostAllocMapped): cudaErrorInvalidValue");
    gb_decision_t d = decide(&f);
    assert_int_equal(d.mode, GB_MODE_RELAUNCH);
    assert_int_equal(d.rule, GB_RULE_NO_MAPPED_PINNED);
    assert_non_null(strstr(d.why, "cudaErrorInvalidValue"));
}

static void test_rule_reported_only(void **state)
{
    (void)state;
    /* Host atomics, managed access and cooperative launch decide nothing. */
    gb_facts_t f = good_facts();
    for (int bits = 0; bits < 8; bits++) {
        f.host_native_atomic_supported = bits & 1;
        f.concurrent_managed_access = bits & 2;
        f.cooperative_launch = bits & 4;
        gb_decision_t d = decide(&f);
        assert_int_equal(d.mode, GB_MODE_PERSISTENT);
        assert_int_equal(d.rule, GB_RULE_NATIVE);
    }
}

static void test_rule_names(void **state)
{
    (void)state;
    assert_string_equal(gb_rule_name(GB_RULE_WSL1), "wsl1");
    assert_string_equal(gb_rule_name(GB_RULE_NO_DEVICE), "no-device");
    assert_string_equal(gb_rule_name(GB_RULE_WSL2), "wsl2");
    assert_string_equal(gb_rule_name(GB_RULE_WATCHDOG), "watchdog");
    assert_string_equal(gb_rule_name(GB_RULE_NO_MAPPED_PINNED), "no-mapped-pinned");
    assert_string_equal(gb_rule_name(GB_RULE_NATIVE), "native");
    assert_string_equal(gb_rule_name((gb_rule)99), "?");
}

/* ---- selection: precedence ----------------------------------------------- */

static void add_host(gb_config_t *cfg, const char *pattern, gb_mode mode, int device)
{
    gb_host_config_t *h = &cfg->hosts[cfg->n_hosts++];
    memset(h, 0, sizeof *h);
    snprintf(h->pattern, sizeof h->pattern, "%s", pattern);
    h->mode = mode;
    h->has_device = device >= 0;
    h->device = device >= 0 ? device : 0;
}

static gb_config_t base_cfg(gb_mode global)
{
    gb_config_t cfg;
    gb_config_defaults(&cfg);
    cfg.n_hosts = 0;
    cfg.mode = global;
    cfg.device = 0;
    return cfg;
}

static gb_selection_t select_ok(const gb_config_t *cfg, const char *host, const char *env,
                                const char *cli, const gb_facts_t *f)
{
    gb_selection_t s;
    char err[256];
    gb_err e = gb_mode_select(cfg, host, env, cli, f, &s, err, sizeof err);
    if (e != GB_OK)
        fail_msg("gb_mode_select: %s", err);
    assert_string_equal(err, "");
    return s;
}

static void test_precedence(void **state)
{
    (void)state;
    gb_facts_t f = good_facts();
    gb_config_t cfg = base_cfg(GB_MODE_CPU);
    add_host(&cfg, "gpu-node-*", GB_MODE_RELAUNCH, -1);

    /* Every combination of the four sources: the highest one present wins. */
    const char *envs[] = {NULL, "persistent"};
    const char *clis[] = {NULL, "cpu"};
    const char *hosts[] = {"laptop", "gpu-node-1"};
    for (int c = 0; c < 2; c++)
        for (int e = 0; e < 2; e++)
            for (int h = 0; h < 2; h++) {
                gb_selection_t s = select_ok(&cfg, hosts[h], envs[e], clis[c], &f);
                gb_mode want;
                gb_mode_source src;
                const char *text;
                if (clis[c]) {
                    want = GB_MODE_CPU, src = GB_SOURCE_CLI, text = "--mode";
                } else if (envs[e]) {
                    want = GB_MODE_PERSISTENT, src = GB_SOURCE_ENV, text = "GPUBRIDGE_MODE";
                } else if (h == 1) {
                    want = GB_MODE_RELAUNCH, src = GB_SOURCE_HOST, text = "host entry 'gpu-node-*'";
                } else {
                    want = GB_MODE_CPU, src = GB_SOURCE_CONFIG, text = "config mode";
                }
                assert_int_equal(s.mode, want);
                assert_int_equal(s.requested, want);
                assert_int_equal(s.source, src);
                assert_string_equal(s.source_text, text);
                assert_string_equal(s.why, text);
                assert_false(s.auto_decided);
                assert_false(s.fell_back);
                assert_int_equal(s.host_index, h == 1 ? 0 : -1);
            }
}

static void test_precedence_cli_beats_env_values(void **state)
{
    (void)state;
    /* Each pair of distinct values: the CLI one wins whatever the env says. */
    gb_facts_t f = good_facts();
    gb_config_t cfg = base_cfg(GB_MODE_AUTO);
    const char *names[] = {"auto", "persistent", "relaunch", "cpu"};
    for (int c = 0; c < 4; c++)
        for (int e = 0; e < 4; e++) {
            gb_selection_t s = select_ok(&cfg, "h", names[e], names[c], &f);
            assert_int_equal(s.requested, (gb_mode)c);
            assert_int_equal(s.source, GB_SOURCE_CLI);
        }
}

static void test_precedence_auto_from_each_source(void **state)
{
    (void)state;
    /* Wherever "auto" comes from, the decision runs and says so. */
    gb_facts_t f = good_facts();
    set_wsl2(&f);
    gb_config_t cfg = base_cfg(GB_MODE_AUTO);
    gb_selection_t s = select_ok(&cfg, "h", NULL, NULL, &f);
    assert_int_equal(s.source, GB_SOURCE_CONFIG);
    assert_true(s.auto_decided);
    assert_int_equal(s.requested, GB_MODE_AUTO);
    assert_int_equal(s.mode, GB_MODE_RELAUNCH);
    assert_int_equal(s.decision.rule, GB_RULE_WSL2);
    assert_true(strncmp(s.why, "auto: WSL2", 10) == 0);

    cfg = base_cfg(GB_MODE_CPU);
    add_host(&cfg, "h*", GB_MODE_AUTO, -1);
    s = select_ok(&cfg, "h1", NULL, NULL, &f);
    assert_int_equal(s.source, GB_SOURCE_HOST);
    assert_true(s.auto_decided);
    assert_int_equal(s.mode, GB_MODE_RELAUNCH);

    s = select_ok(&cfg, "other", "auto", NULL, &f);
    assert_int_equal(s.source, GB_SOURCE_ENV);
    assert_true(s.auto_decided);
    assert_int_equal(s.mode, GB_MODE_RELAUNCH);

    s = select_ok(&cfg, "h1", "cpu", "auto", &f);
    assert_int_equal(s.source, GB_SOURCE_CLI);
    assert_true(s.auto_decided);
    assert_int_equal(s.mode, GB_MODE_RELAUNCH);

    /* An explicit value still records what auto would have chosen. */
    s = select_ok(&cfg, "h1", NULL, "cpu", &f);
    assert_false(s.auto_decided);
    assert_int_equal(s.mode, GB_MODE_CPU);
    assert_int_equal(s.decision.mode, GB_MODE_RELAUNCH);
    assert_string_equal(s.warning, "");
}

static void test_precedence_empty_env_is_unset(void **state)
{
    (void)state;
    gb_facts_t f = good_facts();
    gb_config_t cfg = base_cfg(GB_MODE_RELAUNCH);
    gb_selection_t s = select_ok(&cfg, "h", "", NULL, &f);
    assert_int_equal(s.source, GB_SOURCE_CONFIG);
    assert_int_equal(s.mode, GB_MODE_RELAUNCH);
}

/* ---- selection: host patterns -------------------------------------------- */

static void test_host_first_match_wins(void **state)
{
    (void)state;
    gb_facts_t f = good_facts();
    gb_config_t cfg = base_cfg(GB_MODE_AUTO);
    add_host(&cfg, "laptop", GB_MODE_CPU, -1);
    add_host(&cfg, "gpu-node-[0-9]", GB_MODE_PERSISTENT, 1);
    add_host(&cfg, "gpu-*", GB_MODE_RELAUNCH, 2);
    add_host(&cfg, "*", GB_MODE_CPU, 3);

    gb_selection_t s = select_ok(&cfg, "gpu-node-7", NULL, NULL, &f);
    assert_int_equal(s.host_index, 1);
    assert_string_equal(s.host_pattern, "gpu-node-[0-9]");
    assert_int_equal(s.mode, GB_MODE_PERSISTENT);
    assert_string_equal(s.source_text, "host entry 'gpu-node-[0-9]'");
    assert_int_equal(s.device, 1);
    assert_true(s.device_from_host);

    s = select_ok(&cfg, "gpu-node-12", NULL, NULL, &f);
    assert_int_equal(s.host_index, 2);
    assert_int_equal(s.mode, GB_MODE_RELAUNCH);
    assert_int_equal(s.device, 2);

    /* The catch-all wildcard takes everything else. */
    s = select_ok(&cfg, "build-server", NULL, NULL, &f);
    assert_int_equal(s.host_index, 3);
    assert_int_equal(s.mode, GB_MODE_CPU);
    assert_int_equal(s.device, 3);

    /* Exact names and '?' patterns. */
    s = select_ok(&cfg, "laptop", NULL, NULL, &f);
    assert_int_equal(s.host_index, 0);
    cfg.n_hosts = 0;
    add_host(&cfg, "node?", GB_MODE_CPU, -1);
    assert_int_equal(gb_host_match(&cfg, "node1"), 0);
    assert_int_equal(gb_host_match(&cfg, "node12"), -1);
}

static void test_host_no_match(void **state)
{
    (void)state;
    gb_facts_t f = good_facts();
    gb_config_t cfg = base_cfg(GB_MODE_RELAUNCH);
    cfg.device = 5;
    add_host(&cfg, "gpu-*", GB_MODE_CPU, 1);
    gb_selection_t s = select_ok(&cfg, "laptop", NULL, NULL, &f);
    assert_int_equal(s.host_index, -1);
    assert_string_equal(s.host_pattern, "");
    assert_int_equal(s.source, GB_SOURCE_CONFIG);
    assert_int_equal(s.mode, GB_MODE_RELAUNCH);
    assert_int_equal(s.device, 5);
    assert_false(s.device_from_host);
    assert_int_equal(gb_select_device(&cfg, "laptop"), 5);
    assert_int_equal(gb_select_device(&cfg, "gpu-a"), 1);
    /* No hostname matches nothing, not even "*". */
    add_host(&cfg, "*", GB_MODE_CPU, -1);
    assert_int_equal(gb_host_match(&cfg, ""), -1);
    assert_int_equal(gb_host_match(&cfg, NULL), -1);
}

static void test_host_case_insensitive(void **state)
{
    (void)state;
    gb_config_t cfg = base_cfg(GB_MODE_AUTO);
    add_host(&cfg, "GPU-*", GB_MODE_CPU, -1);
    assert_int_equal(gb_host_match(&cfg, "gpu-a"), 0);
    assert_int_equal(gb_host_match(&cfg, "Gpu-B"), 0);
}

static void test_host_device_with_override(void **state)
{
    (void)state;
    /* The host entry's device applies even when --mode decides the mode, and an
     * entry without a device keeps cfg->device. */
    gb_facts_t f = good_facts();
    gb_config_t cfg = base_cfg(GB_MODE_AUTO);
    cfg.device = 0;
    add_host(&cfg, "a*", GB_MODE_CPU, 2);
    add_host(&cfg, "b*", GB_MODE_CPU, -1);
    gb_selection_t s = select_ok(&cfg, "a1", "relaunch", "persistent", &f);
    assert_int_equal(s.source, GB_SOURCE_CLI);
    assert_int_equal(s.host_index, 0);
    assert_int_equal(s.device, 2);
    assert_true(s.device_from_host);
    s = select_ok(&cfg, "b1", NULL, NULL, &f);
    assert_int_equal(s.device, 0);
    assert_false(s.device_from_host);
}

static void test_host_from_facts(void **state)
{
    (void)state;
    /* hostname NULL: the detected one. */
    gb_facts_t f = good_facts();
    gb_config_t cfg = base_cfg(GB_MODE_AUTO);
    add_host(&cfg, "gpu-node-1", GB_MODE_CPU, -1);
    gb_selection_t s = select_ok(&cfg, NULL, NULL, NULL, &f);
    assert_int_equal(s.host_index, 0);
    assert_int_equal(s.mode, GB_MODE_CPU);
}

/* ---- selection: bad names and fallbacks ---------------------------------- */

static void assert_lists_modes(const char *err)
{
    assert_non_null(strstr(err, "auto"));
    assert_non_null(strstr(err, "persistent"));
    assert_non_null(strstr(err, "relaunch"));
    assert_non_null(strstr(err, "cpu"));
}

static void test_bad_mode_env(void **state)
{
    (void)state;
    gb_facts_t f = good_facts();
    gb_config_t cfg = base_cfg(GB_MODE_AUTO);
    gb_selection_t s;
    char err[256];
    assert_int_equal(gb_mode_select(&cfg, "h", "turbo", NULL, &f, &s, err, sizeof err),
                     GB_ERR_CONFIG);
    assert_non_null(strstr(err, "GPUBRIDGE_MODE"));
    assert_non_null(strstr(err, "'turbo'"));
    assert_lists_modes(err);
    assert_string_equal(err, "GPUBRIDGE_MODE: unknown mode 'turbo' (valid: auto, persistent, "
                             "relaunch, cpu)");
    /* A bad environment value is reported even when --mode is given. */
    assert_int_equal(gb_mode_select(&cfg, "h", "Persistent", "cpu", &f, &s, err, sizeof err),
                     GB_ERR_CONFIG);
    assert_non_null(strstr(err, "GPUBRIDGE_MODE"));
}

static void test_bad_mode_cli(void **state)
{
    (void)state;
    gb_facts_t f = good_facts();
    gb_config_t cfg = base_cfg(GB_MODE_AUTO);
    gb_selection_t s;
    char err[256];
    assert_int_equal(gb_mode_select(&cfg, "h", NULL, "gpu", &f, &s, err, sizeof err),
                     GB_ERR_CONFIG);
    assert_non_null(strstr(err, "--mode"));
    assert_non_null(strstr(err, "'gpu'"));
    assert_lists_modes(err);
    /* The CLI is checked first when both are bad. */
    assert_int_equal(gb_mode_select(&cfg, "h", "bad-env", "bad-cli", &f, &s, err, sizeof err),
                     GB_ERR_CONFIG);
    assert_non_null(strstr(err, "--mode"));
    /* An empty --mode is a bad name, unlike an empty environment variable. */
    assert_int_equal(gb_mode_select(&cfg, "h", NULL, "", &f, &s, err, sizeof err),
                     GB_ERR_CONFIG);
    /* A tiny error buffer is filled, never overrun. */
    char small[8];
    memset(small, 'x', sizeof small);
    assert_int_equal(gb_mode_select(&cfg, "h", NULL, "gpu", &f, &s, small, sizeof small),
                     GB_ERR_CONFIG);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_int_equal(gb_mode_select(&cfg, "h", NULL, "gpu", &f, &s, NULL, 0), GB_ERR_CONFIG);
}

static void test_bad_args(void **state)
{
    (void)state;
    gb_facts_t f = good_facts();
    gb_config_t cfg = base_cfg(GB_MODE_AUTO);
    gb_selection_t s;
    char err[128];
    assert_int_equal(gb_mode_select(NULL, "h", NULL, NULL, &f, &s, err, sizeof err),
                     GB_ERR_INVALID);
    assert_int_equal(gb_mode_select(&cfg, "h", NULL, NULL, NULL, &s, err, sizeof err),
                     GB_ERR_INVALID);
    assert_int_equal(gb_mode_select(&cfg, "h", NULL, NULL, &f, NULL, err, sizeof err),
                     GB_ERR_INVALID);
}

static void test_fallback_no_device(void **state)
{
    (void)state;
    gb_facts_t f = good_facts();
    f.cuda_device_count = 0;
    gb_config_t cfg = base_cfg(GB_MODE_AUTO);
    const char *gpu_modes[] = {"persistent", "relaunch"};
    for (int i = 0; i < 2; i++) {
        gb_selection_t s = select_ok(&cfg, "h", NULL, gpu_modes[i], &f);
        assert_int_equal(s.mode, GB_MODE_CPU);
        assert_true(s.fell_back);
        assert_int_equal(s.requested, i == 0 ? GB_MODE_PERSISTENT : GB_MODE_RELAUNCH);
        assert_non_null(strstr(s.warning, gpu_modes[i]));
        assert_non_null(strstr(s.warning, "no CUDA device"));
        assert_non_null(strstr(s.warning, "cpu mode"));
    }
    /* The same from a host entry and from the config. */
    add_host(&cfg, "h", GB_MODE_PERSISTENT, -1);
    gb_selection_t s = select_ok(&cfg, "h", NULL, NULL, &f);
    assert_true(s.fell_back);
    assert_non_null(strstr(s.warning, "host entry 'h'"));
    cfg = base_cfg(GB_MODE_RELAUNCH);
    s = select_ok(&cfg, "h", NULL, NULL, &f);
    assert_true(s.fell_back);
    assert_int_equal(s.mode, GB_MODE_CPU);

    /* cpu and auto need no fallback. */
    s = select_ok(&cfg, "h", NULL, "cpu", &f);
    assert_false(s.fell_back);
    assert_string_equal(s.warning, "");
    s = select_ok(&cfg, "h", NULL, "auto", &f);
    assert_false(s.fell_back);
    assert_int_equal(s.mode, GB_MODE_CPU);

    /* WSL1 falls back the same way. */
    f = good_facts();
    set_wsl1(&f);
    f.cuda_device_count = 0;
    s = select_ok(&cfg, "h", "persistent", NULL, &f);
    assert_true(s.fell_back);
    assert_non_null(strstr(s.warning, "WSL1"));
}

static void test_explicit_persistent_honoured(void **state)
{
    (void)state;
    /* Where auto would relaunch, an explicit persistent runs, with a warning. */
    gb_facts_t f = good_facts();
    f.kernel_exec_timeout = true;
    gb_config_t cfg = base_cfg(GB_MODE_AUTO);
    gb_selection_t s = select_ok(&cfg, "h", NULL, "persistent", &f);
    assert_int_equal(s.mode, GB_MODE_PERSISTENT);
    assert_false(s.fell_back);
    assert_non_null(strstr(s.warning, "display watchdog"));
    /* relaunch where auto says persistent needs no warning. */
    f = good_facts();
    s = select_ok(&cfg, "h", NULL, "relaunch", &f);
    assert_int_equal(s.mode, GB_MODE_RELAUNCH);
    assert_string_equal(s.warning, "");
}

static void test_force_fallback(void **state)
{
    (void)state;
    gb_config_t cfg = base_cfg(GB_MODE_AUTO);
    cfg.force_fallback_placement = false;
    assert_false(gb_detect_force_fallback(&cfg, NULL));
    assert_false(gb_detect_force_fallback(&cfg, "0"));
    assert_false(gb_detect_force_fallback(&cfg, ""));
    assert_true(gb_detect_force_fallback(&cfg, "1"));
    assert_true(gb_detect_force_fallback(&cfg, "TRUE"));
    cfg.force_fallback_placement = true;
    assert_true(gb_detect_force_fallback(&cfg, NULL));
    assert_true(gb_detect_force_fallback(&cfg, "0"));
}

/* ---- CUDA facts ---------------------------------------------------------- */

static void test_cuda_probe(void **state)
{
    (void)state;
    gb_facts_t f;
    gb_facts_init(&f);
    assert_int_equal(gb_detect_cuda(0, false, &f), GB_OK);
    assert_int_equal(f.device, 0);
    assert_true(f.cuda_device_count >= 0);
#ifndef GB_HAVE_CUDA
    assert_false(f.cuda_built);
    assert_int_equal(f.cuda_device_count, 0);
    assert_string_equal(f.cuda_error, "built without CUDA");
#endif
    if (f.cuda_device_count == 0) {
        /* The GPU-less CI machine: zero devices, a reason, and cpu. */
        assert_true(strlen(f.cuda_error) > 0);
        assert_false(f.mapped_pinned_ok);
        assert_string_equal(f.device_name, "");
        gb_decision_t d = decide(&f);
        assert_int_equal(d.mode, GB_MODE_CPU);
        assert_int_equal(d.rule, GB_RULE_NO_DEVICE);
    } else {
        assert_true(f.cuda_built);
        assert_true(strlen(f.device_name) > 0);
        assert_true(f.cc_major > 0);
        print_message("device 0: %s sm_%d%d, mapped pinned %s%s\n", f.device_name, f.cc_major,
                      f.cc_minor, f.mapped_pinned_ok ? "ok" : "failed: ", f.mapped_pinned_why);
    }

    /* Forced failure is reported as a failure wherever a device exists. */
    gb_facts_init(&f);
    assert_int_equal(gb_detect_cuda(0, true, &f), GB_OK);
    assert_false(f.mapped_pinned_ok);
    if (f.cuda_device_count > 0) {
        assert_true(f.mapped_pinned_forced);
        assert_non_null(strstr(f.mapped_pinned_why, "forced"));
        gb_facts_t native = f;
        snprintf(native.osrelease, sizeof native.osrelease, "6.1.0-18-amd64");
        native.dev_dxg = false;
        gb_detect_classify_os(&native);
        native.kernel_exec_timeout = false;
        assert_int_equal(decide(&native).rule, GB_RULE_NO_MAPPED_PINNED);
    }

    /* An index past the devices never crashes and reports the device absent. */
    gb_facts_init(&f);
    assert_int_equal(gb_detect_cuda(1000, false, &f), GB_OK);
    assert_int_equal(f.device, 1000);
    assert_false(f.mapped_pinned_ok);
    assert_int_equal(decide(&f).rule, GB_RULE_NO_DEVICE);

    assert_int_equal(gb_detect_cuda(0, false, NULL), GB_ERR_INVALID);
}

static void test_detect_run(void **state)
{
    (void)state;
    /* The production path on this machine, with a fake root; no crash, a mode. */
    fake_root r;
    fake_root_make(&r, false, "6.1.0-18-amd64", "ci-runner");
    gb_config_t cfg = base_cfg(GB_MODE_AUTO);
    add_host(&cfg, "ci-*", GB_MODE_AUTO, -1);
    gb_facts_t f;
    gb_selection_t s;
    char err[256];
    unsetenv("GPUBRIDGE_MODE");
    unsetenv("GPUBRIDGE_FORCE_FALLBACK");
    assert_int_equal(gb_detect_run(&cfg, r.dir, NULL, &f, &s, err, sizeof err), GB_OK);
    assert_string_equal(f.hostname, "ci-runner");
    assert_int_equal(s.host_index, 0);
    assert_true(s.auto_decided);
    if (f.cuda_device_count == 0)
        assert_int_equal(s.mode, GB_MODE_CPU);

    setenv("GPUBRIDGE_MODE", "cpu", 1);
    assert_int_equal(gb_detect_run(&cfg, r.dir, NULL, &f, &s, err, sizeof err), GB_OK);
    assert_int_equal(s.source, GB_SOURCE_ENV);
    assert_int_equal(s.mode, GB_MODE_CPU);
    setenv("GPUBRIDGE_MODE", "nonsense", 1);
    assert_int_equal(gb_detect_run(&cfg, r.dir, NULL, &f, &s, err, sizeof err), GB_ERR_CONFIG);
    assert_non_null(strstr(err, "GPUBRIDGE_MODE"));
    unsetenv("GPUBRIDGE_MODE");
    fake_root_remove(&r);
}

/* ---- printing ------------------------------------------------------------ */

static char *print_to_string(const gb_facts_t *f, const gb_selection_t *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    assert_non_null(fp);
    gb_detect_print(f, s, fp);
    fclose(fp);
    return buf;
}

/* Every line is "key: value" with the values in one column. */
static void assert_aligned(const char *text)
{
    int col = -1;
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        assert_non_null(nl);
        const char *colon = memchr(line, ':', (size_t)(nl - line));
        assert_non_null(colon);
        const char *val = colon + 1;
        while (*val == ' ')
            val++;
        int c = (int)(val - line);
        if (col < 0)
            col = c;
        assert_int_equal(c, col);
        line = nl + 1;
    }
    assert_true(col > 0);
}

static void test_print(void **state)
{
    (void)state;
    gb_facts_t f = good_facts();
    set_wsl2(&f);
    gb_config_t cfg = base_cfg(GB_MODE_AUTO);
    add_host(&cfg, "gpu-*", GB_MODE_AUTO, 0);
    gb_selection_t s = select_ok(&cfg, NULL, NULL, NULL, &f);
    char *text = print_to_string(&f, &s);
    assert_aligned(text);
    const char *keys[] = {"hostname:", "osrelease:", "/dev/dxg:", "wsl2:", "wsl1:",
                          "cuda built:", "cuda devices:", "device:", "compute capability:",
                          "kernel exec timeout:", "mapped pinned memory:",
                          "concurrent managed access:", "cooperative launch:",
                          "host native atomics:", "rule:", "auto decision:", "requested:",
                          "host entry:", "selected device:", "mode:", "why:"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strstr(text, keys[i]))
            fail_msg("missing key %s in:\n%s", keys[i], text);
    assert_non_null(strstr(text, "wsl2"));
    assert_non_null(strstr(text, "relaunch"));
    assert_non_null(strstr(text, "NVIDIA H100 80GB HBM3"));
    assert_non_null(strstr(text, "host entry 'gpu-*'"));
    free(text);

    /* Without a selection, without a device, with a warning. */
    gb_facts_init(&f);
    text = print_to_string(&f, NULL);
    assert_aligned(text);
    assert_non_null(strstr(text, "no-device"));
    assert_null(strstr(text, "mode:"));
    free(text);
    f.cuda_device_count = 0;
    f.device = 0;
    s = select_ok(&cfg, "laptop", NULL, "persistent", &f);
    text = print_to_string(&f, &s);
    assert_aligned(text);
    assert_non_null(strstr(text, "warning:"));
    assert_non_null(strstr(text, "(not present)"));
    free(text);
}

static void test_summary(void **state)
{
    (void)state;
    gb_facts_t f = good_facts();
    gb_config_t cfg = base_cfg(GB_MODE_AUTO);
    gb_selection_t s = select_ok(&cfg, "h", NULL, NULL, &f);
    char line[1024];
    gb_detect_summary(&f, &s, line, sizeof line);
    assert_null(strchr(line, '\n'));
    assert_non_null(strstr(line, "mode persistent from config mode"));
    assert_non_null(strstr(line, "rule native"));
    assert_non_null(strstr(line, "NVIDIA H100 80GB HBM3 (sm_90)"));

    s = select_ok(&cfg, "h", "relaunch", NULL, &f);
    gb_detect_summary(&f, &s, line, sizeof line);
    assert_non_null(strstr(line, "mode relaunch from GPUBRIDGE_MODE"));
    assert_null(strstr(line, "rule"));

    /* Truncation is safe. */
    char small[16];
    assert_ptr_equal(gb_detect_summary(&f, &s, small, sizeof small), small);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_string_equal(gb_detect_summary(&f, &s, NULL, 0), "");
}

int main(void)
{
    /* Quiet: the fallback warnings are expected here. */
    gb_log_set_level(GB_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fs_native),
        cmocka_unit_test(test_fs_wsl2_current),
        cmocka_unit_test(test_fs_wsl2_older),
        cmocka_unit_test(test_fs_wsl1),
        cmocka_unit_test(test_fs_mixed_case),
        cmocka_unit_test(test_fs_dxg),
        cmocka_unit_test(test_fs_missing_files),
        cmocka_unit_test(test_fs_trailing_slash),
        cmocka_unit_test(test_fs_real_root),
        cmocka_unit_test(test_rule_native),
        cmocka_unit_test(test_rule_no_device),
        cmocka_unit_test(test_rule_wsl2),
        cmocka_unit_test(test_rule_wsl1),
        cmocka_unit_test(test_rule_watchdog),
        cmocka_unit_test(test_rule_no_mapped_pinned),
        cmocka_unit_test(test_rule_reported_only),
        cmocka_unit_test(test_rule_names),
        cmocka_unit_test(test_precedence),
        cmocka_unit_test(test_precedence_cli_beats_env_values),
        cmocka_unit_test(test_precedence_auto_from_each_source),
        cmocka_unit_test(test_precedence_empty_env_is_unset),
        cmocka_unit_test(test_host_first_match_wins),
        cmocka_unit_test(test_host_no_match),
        cmocka_unit_test(test_host_case_insensitive),
        cmocka_unit_test(test_host_device_with_override),
        cmocka_unit_test(test_host_from_facts),
        cmocka_unit_test(test_bad_mode_env),
        cmocka_unit_test(test_bad_mode_cli),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_fallback_no_device),
        cmocka_unit_test(test_explicit_persistent_honoured),
        cmocka_unit_test(test_force_fallback),
        cmocka_unit_test(test_cuda_probe),
        cmocka_unit_test(test_detect_run),
        cmocka_unit_test(test_print),
        cmocka_unit_test(test_summary),
    };
    return cmocka_run_group_tests_name("detect", tests, NULL, NULL);
}
