/* libFuzzer target: the config loader on arbitrary text. It must accept or
 * reject with a message, never crash, and leave the config untouched on
 * error (nothing half-loaded). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size); /* libFuzzer's entry point */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    gb_config_t cfg, before;
    gb_config_defaults(&cfg);
    memcpy(&before, &cfg, sizeof cfg);
    char err[512];
    if (gb_config_load_string(text, "fuzz.cfg", &cfg, err, sizeof err) != GB_OK) {
        if (memcmp(&before, &cfg, sizeof cfg) != 0 || err[0] == '\0')
            __builtin_trap(); /* half-loaded, or an error without a message */
    } else {
        /* What loads must print and load again to the same config. */
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        gb_config_print(&cfg, f);
        fclose(f);
        gb_config_t again;
        gb_config_defaults(&again);
        if (gb_config_load_string(buf, "printed.cfg", &again, err, sizeof err) != GB_OK)
            __builtin_trap();
        free(buf);
    }
    free(text);
    return 0;
}
