/* Detection facts from the filesystem, the auto decision, and mode selection.
 * The CUDA facts are gathered in detect_cuda.c so that this file stays pure C
 * and every rule can be tested with hand-filled facts on a GPU-less machine. */
#include "detect.h"

#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "test_hooks.h"

/* vsnprintf behind a function so that truncation of long quoted facts is an
 * accepted outcome (buffers are sized for real inputs) rather than a warning. */
__attribute__((format(printf, 3, 4))) static void gbi_fmt(char *buf, size_t len,
                                                          const char *fmt, ...)
{
    if (!buf || len == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

/* Appends to a NUL-terminated buffer. */
__attribute__((format(printf, 3, 4))) static void gbi_append(char *buf, size_t len,
                                                             const char *fmt, ...)
{
    size_t used = strnlen(buf, len);
    if (used + 1 >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, len - used, fmt, ap);
    va_end(ap);
}

void gb_facts_init(gb_facts_t *f)
{
    if (!f)
        return;
    memset(f, 0, sizeof *f);
    f->device = -1;
}

/* ---- filesystem facts ---------------------------------------------------- */

/* <root><rel>, with rel starting with '/' and root's trailing slashes dropped. */
static bool gbi_path(char *buf, size_t len, const char *root, const char *rel)
{
    size_t n = strlen(root);
    while (n > 0 && root[n - 1] == '/')
        n--;
    int w = snprintf(buf, len, "%.*s%s", (int)n, root, rel);
    return w > 0 && (size_t)w < len;
}

/* First line of a small file, without the newline; false when unreadable. */
static bool gbi_read_line(const char *path, char *buf, size_t len)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return false;
    bool ok = fgets(buf, (int)len, fp) != NULL;
    fclose(fp);
    if (!ok) {
        buf[0] = '\0';
        return false;
    }
    buf[strcspn(buf, "\r\n")] = '\0';
    return true;
}

void gb_detect_classify_os(gb_facts_t *f)
{
    const char *os = f->osrelease;
    bool ms = strcasestr(os, "microsoft") != NULL;
    bool ms_std = strcasestr(os, "microsoft-standard") != NULL;
    bool wsl2_tag = strcasestr(os, "wsl2") != NULL;
    /* "wsl" without "microsoft": a custom WSL2 kernel (WSL1 always says Microsoft). */
    bool wsl_only = !ms && strcasestr(os, "wsl") != NULL;

    f->wsl1 = f->wsl2 = false;
    f->wsl1_why[0] = f->wsl2_why[0] = '\0';

    /* Every piece of evidence is listed, so --detect shows why. */
    char *w = f->wsl2_why;
    size_t wl = sizeof f->wsl2_why;
    if (f->dev_dxg)
        gbi_append(w, wl, "/dev/dxg present");
    if (wsl2_tag)
        gbi_append(w, wl, "%sosrelease contains 'WSL2'", w[0] ? ", " : "");
    if (ms_std)
        gbi_append(w, wl, "%sosrelease contains 'microsoft-standard'", w[0] ? ", " : "");
    if (wsl_only)
        gbi_append(w, wl, "%sosrelease contains 'WSL'", w[0] ? ", " : "");
    if (w[0]) {
        f->wsl2 = true;
        return;
    }
    if (ms) {
        /* WSL1 kernels report e.g. "4.4.0-19041-Microsoft": no standard kernel tag. */
        f->wsl1 = true;
        gbi_fmt(f->wsl1_why, sizeof f->wsl1_why,
                "osrelease contains 'microsoft' without 'microsoft-standard' or 'WSL2', "
                "and no /dev/dxg");
    }
}

gb_err gb_detect_fs(const char *root, gb_facts_t *f)
{
    if (!root || !f)
        return GB_ERR_INVALID;
    char path[4096];
    struct stat st;

    /* Any file type counts: the real one is a character device, fake roots use files. */
    f->dev_dxg = gbi_path(path, sizeof path, root, "/dev/dxg") && stat(path, &st) == 0;

    f->osrelease[0] = '\0';
    if (gbi_path(path, sizeof path, root, "/proc/sys/kernel/osrelease"))
        gbi_read_line(path, f->osrelease, sizeof f->osrelease);

    /* In production gethostname() is the source; under a fake root only the file
     * is, so tests never see the real host's name. */
    f->hostname[0] = '\0';
    bool real_root = strspn(root, "/") == strlen(root) && root[0] == '/';
    if (real_root && gethostname(f->hostname, sizeof f->hostname) == 0)
        f->hostname[sizeof f->hostname - 1] = '\0'; /* POSIX leaves truncation unterminated */
    else
        f->hostname[0] = '\0';
    if (!f->hostname[0] && gbi_path(path, sizeof path, root, "/proc/sys/kernel/hostname"))
        gbi_read_line(path, f->hostname, sizeof f->hostname);

    gb_detect_classify_os(f);
    return GB_OK;
}

bool gb_detect_force_fallback(const gb_config_t *cfg, const char *env_value)
{
    if (cfg && cfg->force_fallback_placement)
        return true;
    if (!env_value)
        return false;
    return strcmp(env_value, "1") == 0 || strcasecmp(env_value, "true") == 0 ||
           strcasecmp(env_value, "yes") == 0 || strcasecmp(env_value, "on") == 0;
}

/* ---- decision ------------------------------------------------------------ */

const char *gb_rule_name(gb_rule rule)
{
    switch (rule) {
    case GB_RULE_WSL1: return "wsl1";
    case GB_RULE_NO_DEVICE: return "no-device";
    case GB_RULE_WSL2: return "wsl2";
    case GB_RULE_WATCHDOG: return "watchdog";
    case GB_RULE_NO_MAPPED_PINNED: return "no-mapped-pinned";
    case GB_RULE_NATIVE: return "native";
    }
    return "?";
}

static void gbi_decide(gb_decision_t *d, gb_mode mode, gb_rule rule)
{
    d->mode = mode;
    d->rule = rule;
}

void gb_detect_decide(const gb_facts_t *f, gb_decision_t *d)
{
    if (!d)
        return;
    memset(d, 0, sizeof *d);
    if (!f) {
        gbi_decide(d, GB_MODE_CPU, GB_RULE_NO_DEVICE);
        gbi_fmt(d->why, sizeof d->why, "no CUDA device (nothing detected)");
        return;
    }
    /* WSL1 is checked before the device count: both give cpu, but "WSL1" tells
     * the user what to change, "no CUDA device" does not. */
    if (f->wsl1) {
        gbi_decide(d, GB_MODE_CPU, GB_RULE_WSL1);
        gbi_fmt(d->why, sizeof d->why,
                "WSL1 (osrelease '%s'): WSL1 has no GPU access, CUDA needs WSL2; "
                "convert the distribution with 'wsl --set-version <distro> 2'",
                f->osrelease);
        return;
    }
    if (f->cuda_device_count <= 0) {
        gbi_decide(d, GB_MODE_CPU, GB_RULE_NO_DEVICE);
        gbi_fmt(d->why, sizeof d->why, "no CUDA device (%s)",
                f->cuda_error[0] ? f->cuda_error : "the CUDA runtime reports 0 devices");
        return;
    }
    if (f->device < 0 || f->device >= f->cuda_device_count) {
        gbi_decide(d, GB_MODE_CPU, GB_RULE_NO_DEVICE);
        gbi_fmt(d->why, sizeof d->why,
                "no CUDA device: device %d is not present (%d device%s, 0..%d)", f->device,
                f->cuda_device_count, f->cuda_device_count == 1 ? "" : "s",
                f->cuda_device_count - 1);
        return;
    }
    if (f->wsl2) {
        gbi_decide(d, GB_MODE_RELAUNCH, GB_RULE_WSL2);
        gbi_fmt(d->why, sizeof d->why,
                "WSL2 (%s): a resident kernel blocks every host CUDA call under WSL2",
                f->wsl2_why[0] ? f->wsl2_why : "detected");
        return;
    }
    if (f->kernel_exec_timeout) {
        gbi_decide(d, GB_MODE_RELAUNCH, GB_RULE_WATCHDOG);
        gbi_fmt(d->why, sizeof d->why,
                "display watchdog (cudaDevAttrKernelExecTimeout set on device %d): "
                "a kernel that never exits would be killed",
                f->device);
        return;
    }
    if (!f->mapped_pinned_ok) {
        gbi_decide(d, GB_MODE_RELAUNCH, GB_RULE_NO_MAPPED_PINNED);
        gbi_fmt(d->why, sizeof d->why,
                "mapped pinned memory unavailable (%s): rings live in device memory "
                "with staged copies between launches",
                f->mapped_pinned_why[0] ? f->mapped_pinned_why : "probe failed");
        return;
    }
    gbi_decide(d, GB_MODE_PERSISTENT, GB_RULE_NATIVE);
    gbi_fmt(d->why, sizeof d->why,
            "native GPU host: no WSL, no display watchdog, mapped pinned memory works");
}

/* ---- selection ----------------------------------------------------------- */

int gb_host_match(const gb_config_t *cfg, const char *hostname)
{
    if (!cfg || !hostname || !hostname[0])
        return -1;
    size_t n = cfg->n_hosts < GB_MAX_HOSTS ? cfg->n_hosts : GB_MAX_HOSTS;
    for (size_t i = 0; i < n; i++) {
        /* Hostnames are case-insensitive (DNS), so the patterns are too. */
        if (fnmatch(cfg->hosts[i].pattern, hostname, FNM_CASEFOLD) == 0)
            return (int)i;
    }
    return -1;
}

int gb_select_device(const gb_config_t *cfg, const char *hostname)
{
    if (!cfg)
        return 0;
    int h = gb_host_match(cfg, hostname);
    if (h >= 0 && cfg->hosts[h].has_device)
        return cfg->hosts[h].device;
    return cfg->device;
}

gb_err gb_mode_parse_named(const char *what, const char *value, gb_mode *out, char *err, size_t errlen)
{
    if (gb_mode_parse(value, out) == 0)
        return GB_OK;
    if (err && errlen) {
        gbi_fmt(err, errlen, "%s: unknown mode '%s' (valid: ", what, value);
        for (int m = GB_MODE_AUTO; m <= GB_MODE_CPU; m++)
            gbi_append(err, errlen, "%s%s", m == GB_MODE_AUTO ? "" : ", ", gb_mode_name((gb_mode)m));
        gbi_append(err, errlen, ")");
    }
    return GB_ERR_CONFIG;
}

gb_err gb_mode_select(const gb_config_t *cfg, const char *hostname, const char *env_mode,
                      const char *cli_mode, const gb_facts_t *facts, gb_selection_t *out,
                      char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!out)
        return GB_ERR_INVALID;
    memset(out, 0, sizeof *out);
    out->host_index = -1;
    if (!cfg || !facts) {
        gbi_fmt(err, errlen, "mode selection needs a config and detection facts");
        return GB_ERR_INVALID;
    }
    if (!hostname)
        hostname = facts->hostname;

    /* Both overrides are validated, even when --mode shadows the environment. */
    gb_mode cli_m = GB_MODE_AUTO, env_m = GB_MODE_AUTO;
    bool have_cli = cli_mode != NULL;
    bool have_env = env_mode != NULL && env_mode[0] != '\0';
    if (have_cli && gb_mode_parse_named("--mode", cli_mode, &cli_m, err, errlen) != GB_OK)
        return GB_ERR_CONFIG;
    if (have_env && gb_mode_parse_named("GPUBRIDGE_MODE", env_mode, &env_m, err, errlen) != GB_OK)
        return GB_ERR_CONFIG;

    /* The host entry supplies the device even when the mode comes from elsewhere. */
    int h = gb_host_match(cfg, hostname);
    out->host_index = h;
    out->device = cfg->device;
    if (h >= 0) {
        gbi_fmt(out->host_pattern, sizeof out->host_pattern, "%s", cfg->hosts[h].pattern);
        if (cfg->hosts[h].has_device) {
            out->device = cfg->hosts[h].device;
            out->device_from_host = true;
        }
    }

    if (have_cli) {
        out->requested = cli_m;
        out->source = GB_SOURCE_CLI;
        gbi_fmt(out->source_text, sizeof out->source_text, "--mode");
    } else if (have_env) {
        out->requested = env_m;
        out->source = GB_SOURCE_ENV;
        gbi_fmt(out->source_text, sizeof out->source_text, "GPUBRIDGE_MODE");
    } else if (h >= 0) {
        out->requested = cfg->hosts[h].mode;
        out->source = GB_SOURCE_HOST;
        gbi_fmt(out->source_text, sizeof out->source_text, "host entry '%s'",
                cfg->hosts[h].pattern);
    } else {
        out->requested = cfg->mode;
        out->source = GB_SOURCE_CONFIG;
        gbi_fmt(out->source_text, sizeof out->source_text, "config mode");
    }

    /* Always decided, so --detect can show what auto would pick next to an override. */
    gb_detect_decide(facts, &out->decision);

    if (out->requested == GB_MODE_AUTO) {
        out->mode = out->decision.mode;
        out->auto_decided = true;
        gbi_fmt(out->why, sizeof out->why, "auto: %s", out->decision.why);
        return GB_OK;
    }

    out->mode = out->requested;
    gbi_fmt(out->why, sizeof out->why, "%s", out->source_text);
    if (out->mode != GB_MODE_CPU && out->decision.mode == GB_MODE_CPU) {
        /* Asked for a GPU mode where there is no GPU: run anyway, on CPU threads,
         * rather than refuse to start (a forced GPU mode is not an option). */
        out->fell_back = true;
        out->mode = GB_MODE_CPU;
        gbi_fmt(out->warning, sizeof out->warning,
                "mode '%s' from %s needs a CUDA device, but %s; running in cpu mode instead",
                gb_mode_name(out->requested), out->source_text, out->decision.why);
        GB_WARN("%s", out->warning);
    } else if (out->mode == GB_MODE_PERSISTENT && out->decision.mode == GB_MODE_RELAUNCH) {
        /* Honoured (the user may know better, e.g. a watchdog turned off), but said. */
        gbi_fmt(out->warning, sizeof out->warning,
                "mode 'persistent' from %s although auto would choose relaunch: %s",
                out->source_text, out->decision.why);
        GB_WARN("%s", out->warning);
    }
    return GB_OK;
}

gb_err gb_detect_run(const gb_config_t *cfg, const char *root, const char *cli_mode,
                     gb_facts_t *facts, gb_selection_t *sel, char *err, size_t errlen)
{
    if (!cfg || !facts || !sel)
        return GB_ERR_INVALID;
    gb_facts_init(facts);
    gb_err e = gb_detect_fs(root ? root : "/", facts);
    if (e != GB_OK)
        return e;
    int dev = gb_select_device(cfg, facts->hostname);
    e = gb_detect_cuda(dev, gb_detect_force_fallback(cfg, gb_test_hook(GB_HOOK_FORCE_FALLBACK)),
                       facts);
    if (e != GB_OK)
        return e;
    e = gb_mode_select(cfg, NULL, getenv("GPUBRIDGE_MODE"), cli_mode, facts, sel, err, errlen);
    if (e != GB_OK)
        return e;
    char line[2048];
    GB_INFO("%s", gb_detect_summary(facts, sel, line, sizeof line));
    return GB_OK;
}

/* ---- reporting ----------------------------------------------------------- */

#define GBI_KEY_WIDTH 27 /* the longest key ("concurrent managed access:") plus one */

__attribute__((format(printf, 3, 4))) static void gbi_kv(FILE *out, const char *key,
                                                        const char *fmt, ...)
{
    char k[64];
    gbi_fmt(k, sizeof k, "%s:", key);
    fprintf(out, "%-*s ", GBI_KEY_WIDTH, k);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(out, fmt, ap);
    va_end(ap);
    fputc('\n', out);
}

static const char *gbi_yn(bool b) { return b ? "yes" : "no"; }

static bool gbi_device_present(const gb_facts_t *f)
{
    return f->device >= 0 && f->device < f->cuda_device_count;
}

void gb_detect_print(const gb_facts_t *f, const gb_selection_t *sel, FILE *out)
{
    if (!f || !out)
        return;
    gbi_kv(out, "hostname", "%s", f->hostname[0] ? f->hostname : "(unknown)");
    gbi_kv(out, "osrelease", "%s", f->osrelease[0] ? f->osrelease : "(unreadable)");
    gbi_kv(out, "/dev/dxg", "%s", f->dev_dxg ? "present" : "absent");
    if (f->wsl2)
        gbi_kv(out, "wsl2", "yes (%s)", f->wsl2_why);
    else
        gbi_kv(out, "wsl2", "no");
    if (f->wsl1)
        gbi_kv(out, "wsl1", "yes (%s)", f->wsl1_why);
    else
        gbi_kv(out, "wsl1", "no");

    gbi_kv(out, "cuda built", "%s", gbi_yn(f->cuda_built));
    if (f->cuda_built && f->cuda_driver_version > 0)
        gbi_kv(out, "cuda runtime / driver", "%d.%d / %d.%d", f->cuda_runtime_version / 1000,
               f->cuda_runtime_version % 1000 / 10, f->cuda_driver_version / 1000,
               f->cuda_driver_version % 1000 / 10);
    else if (f->cuda_built)
        gbi_kv(out, "cuda runtime / driver", "%d.%d / (no driver)", f->cuda_runtime_version / 1000,
               f->cuda_runtime_version % 1000 / 10);
    if (f->cuda_error[0])
        gbi_kv(out, "cuda devices", "%d (%s)", f->cuda_device_count, f->cuda_error);
    else
        gbi_kv(out, "cuda devices", "%d", f->cuda_device_count);

    if (gbi_device_present(f)) {
        gbi_kv(out, "device", "%d (%s)", f->device, f->device_name);
        gbi_kv(out, "compute capability", "%d.%d", f->cc_major, f->cc_minor);
        gbi_kv(out, "kernel exec timeout", "%s", f->kernel_exec_timeout ? "yes (display watchdog)" : "no");
        gbi_kv(out, "can map host memory", "%s", gbi_yn(f->can_map_host_memory));
        if (f->mapped_pinned_ok)
            gbi_kv(out, "mapped pinned memory", "ok (4 KiB probe)");
        else
            gbi_kv(out, "mapped pinned memory", "failed (%s)",
                   f->mapped_pinned_why[0] ? f->mapped_pinned_why : "probe failed");
        gbi_kv(out, "concurrent managed access", "%s", gbi_yn(f->concurrent_managed_access));
        gbi_kv(out, "cooperative launch", "%s", gbi_yn(f->cooperative_launch));
        gbi_kv(out, "host native atomics", "%s (reported only)",
               gbi_yn(f->host_native_atomic_supported));
    } else if (f->device >= 0) {
        gbi_kv(out, "device", "%d (not present)", f->device);
    } else {
        gbi_kv(out, "device", "(not probed)");
    }

    gb_decision_t local;
    const gb_decision_t *d = sel ? &sel->decision : &local;
    if (!sel)
        gb_detect_decide(f, &local);
    gbi_kv(out, "rule", "%s", gb_rule_name(d->rule));
    gbi_kv(out, "auto decision", "%s: %s", gb_mode_name(d->mode), d->why);
    if (!sel)
        return;
    gbi_kv(out, "requested", "%s (from %s)", gb_mode_name(sel->requested), sel->source_text);
    if (sel->host_index >= 0)
        gbi_kv(out, "host entry", "#%d '%s'", sel->host_index, sel->host_pattern);
    else
        gbi_kv(out, "host entry", "(none matches)");
    gbi_kv(out, "selected device", "%d (from %s)", sel->device,
           sel->device_from_host ? "host entry" : "config device");
    gbi_kv(out, "mode", "%s", gb_mode_name(sel->mode));
    gbi_kv(out, "why", "%s", sel->why);
    if (sel->warning[0])
        gbi_kv(out, "warning", "%s", sel->warning);
}

const char *gb_detect_summary(const gb_facts_t *f, const gb_selection_t *sel, char *buf,
                              size_t len)
{
    if (!buf || len == 0)
        return "";
    buf[0] = '\0';
    if (!f)
        return buf;
    gb_decision_t local;
    const gb_decision_t *d = sel ? &sel->decision : &local;
    if (!sel)
        gb_detect_decide(f, &local);

    if (sel)
        gbi_append(buf, len, "mode %s from %s", gb_mode_name(sel->mode), sel->source_text);
    else
        gbi_append(buf, len, "mode %s", gb_mode_name(d->mode));
    if (!sel || sel->auto_decided)
        gbi_append(buf, len, " (auto, rule %s: %s)", gb_rule_name(d->rule), d->why);
    else if (sel->fell_back)
        gbi_append(buf, len, " (fell back to cpu: rule %s)", gb_rule_name(d->rule));
    gbi_append(buf, len, "; host '%s'", f->hostname);
    if (gbi_device_present(f))
        gbi_append(buf, len, "; device %d of %d: %s (sm_%d%d)", f->device, f->cuda_device_count,
                   f->device_name, f->cc_major, f->cc_minor);
    else
        gbi_append(buf, len, "; %d CUDA device%s", f->cuda_device_count,
                   f->cuda_device_count == 1 ? "" : "s");
    return buf;
}
