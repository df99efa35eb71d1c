/* Several devices: the list the config gives, and a mode for each. */
#include <stdio.h>
#include <string.h>

#include "detect.h"
#include "log.h"

/* The listed devices (all: the host's, at most GB_MAX_DEVICES); n of them. */
static size_t listed(const gb_config_t *cfg, int count, int devices[GB_MAX_DEVICES])
{
    if (!cfg->devices_all) {
        memcpy(devices, cfg->devices, cfg->n_devices * sizeof *devices);
        return cfg->n_devices;
    }
    size_t want = (size_t)(count > 0 ? count : 1);
    if (want > GB_MAX_DEVICES) {
        GB_WARN("devices = \"all\": this host has %d CUDA devices; the bridge drives the first %d", count,
                GB_MAX_DEVICES);
        want = GB_MAX_DEVICES;
    }
    for (size_t i = 0; i < want; i++)
        devices[i] = (int)i;
    return want;
}

gb_err gb_detect_devices(const gb_config_t *cfg, const char *root, const char *cli_mode, const gb_facts_t *facts0,
                         const gb_selection_t *sel0, gb_engine_dev_t devs[GB_MAX_DEVICES], size_t *n, char *err,
                         size_t errlen)
{
    const int count = facts0->cuda_device_count;
    const bool several = cfg->n_devices > 1 || cfg->devices_all;
    *n = 1;
    devs[0] = (gb_engine_dev_t){sel0->device, sel0->mode};
    if (!several)
        return GB_OK;
    if (sel0->device_from_host) {
        GB_INFO("hosts entry '%s' sets device %d: the devices list of the config is not used on this host",
                sel0->host_pattern, sel0->device);
        return GB_OK;
    }
    int devices[GB_MAX_DEVICES];
    const size_t want = listed(cfg, count, devices);
    /* Only cpu mode asked for by name runs devices the host lacks (as cpu
     * threads); auto would quietly turn a missing GPU into cpu threads. */
    const bool cpu_asked = sel0->requested == GB_MODE_CPU;
    for (size_t i = 0; i < want; i++)
        if (count > 0 && !cpu_asked && devices[i] >= count) {
            snprintf(err, errlen, "%s: devices[%zu] is %d, but this host has %d CUDA device%s (0..%d)", cfg->source,
                     i, devices[i], count, count == 1 ? "" : "s", count - 1);
            return GB_ERR_CONFIG;
        }
    for (size_t i = 1; i < want; i++) {
        devs[i] = (gb_engine_dev_t){devices[i], GB_MODE_CPU};
        if (count == 0 || sel0->mode == GB_MODE_CPU) /* no GPU: every device is host threads */
            continue;
        gb_config_t one = *cfg;
        one.device = devices[i];
        one.n_devices = 0;
        one.devices_all = false;
        gb_facts_t f;
        gb_selection_t s;
        gb_err e = gb_detect_run(&one, root, cli_mode, &f, &s, err, errlen); /* logs its decision and warning */
        if (e != GB_OK)
            return e;
        devs[i].mode = s.mode;
    }
    *n = want;
    return GB_OK;
}
