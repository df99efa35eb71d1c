/* Several devices: the list the config gives, and a mode for each. */
#include <stdio.h>
#include <string.h>

#include "detect.h"

gb_err gb_detect_devices(const gb_config_t *cfg, const char *root, const char *cli_mode, const gb_facts_t *facts0,
                         const gb_selection_t *sel0, int devices[GB_MAX_DEVICES], gb_mode modes[GB_MAX_DEVICES],
                         size_t *n, char *err, size_t errlen)
{
    const int count = facts0->cuda_device_count;
    *n = 0;
    if (sel0->device_from_host || (cfg->n_devices <= 1 && !cfg->devices_all)) {
        devices[0] = sel0->device;
        modes[0] = sel0->mode;
        *n = 1;
        return GB_OK;
    }
    size_t want = cfg->devices_all ? (size_t)(count > 0 ? count : 1) : cfg->n_devices;
    if (want > GB_MAX_DEVICES)
        want = GB_MAX_DEVICES;
    for (size_t i = 0; i < want; i++) {
        devices[i] = cfg->devices_all ? (int)i : cfg->devices[i];
        if (count > 0 && sel0->mode != GB_MODE_CPU && devices[i] >= count) {
            snprintf(err, errlen, "%s: devices[%zu] is %d, but this host has %d CUDA device%s (0..%d)", cfg->source,
                     i, devices[i], count, count == 1 ? "" : "s", count - 1);
            return GB_ERR_CONFIG;
        }
    }
    devices[0] = sel0->device;
    modes[0] = sel0->mode;
    for (size_t i = 1; i < want; i++) {
        if (count == 0 || sel0->mode == GB_MODE_CPU) { /* no GPU: every device is host threads */
            modes[i] = GB_MODE_CPU;
            continue;
        }
        gb_config_t one = *cfg;
        one.device = devices[i];
        one.n_devices = 0;
        one.devices_all = false;
        gb_facts_t f;
        gb_selection_t s;
        gb_err e = gb_detect_run(&one, root, cli_mode, &f, &s, err, errlen);
        if (e != GB_OK)
            return e;
        modes[i] = s.mode;
    }
    *n = want;
    return GB_OK;
}
