/* libFuzzer target: a client frame's bytes through the bridge's whole
 * request path: size check, ClientFrame decode, envelope validation, grain
 * codecs, ring slots, cpu dispatch (inline), reply encoding, holding frames
 * for full rings, control messages. Every input must be answered or
 * processed without a crash, a leak or undefined behaviour. The engine runs
 * two cpu devices, so keys spread over them and a PageRank job may span
 * both (its grains then write into the other device's arena). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "engine.h"
#include "log.h"
#include "server_internal.h"

static gb_config_t g_cfg;
static gb_engine_t *g_engine;
static gb_server_t *g_server;

static void start(void)
{
    char err[256];
    static const gb_engine_dev_t devs[2] = {{0, GB_MODE_CPU}, {1, GB_MODE_CPU}};
    if (gb_engine_new_devs(&g_cfg, devs, 2, &g_engine) != GB_OK ||
        gb_server_new(&g_cfg, g_engine, NULL, NULL, &g_server, err, sizeof err) != GB_OK) {
        fprintf(stderr, "fuzz_frame: cannot start: %s\n", err);
        __builtin_trap();
    }
}

static void stop(void)
{
    gb_server_destroy(&g_server);
    gb_engine_destroy(&g_engine, 1000);
}

int LLVMFuzzerInitialize(int *argc, char ***argv); /* libFuzzer's entry point */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    gb_log_set_level(GB_LOG_ERROR);
    gb_config_defaults(&g_cfg);
    g_cfg.n_endpoints = 1;
    snprintf(g_cfg.endpoints[0], sizeof g_cfg.endpoints[0], "inproc://fuzz-frame");
    g_cfg.max_message_size = 65536;
    for (size_t i = 0; i < g_cfg.n_grains; i++) {
        g_cfg.grains[i].queue_capacity = 16; /* small rings: holding is exercised */
        g_cfg.grains[i].max_grains = 64;
        g_cfg.grains[i].cpu_threads = 0;     /* inline: deterministic */
    }
    start();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size); /* libFuzzer's entry point */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Both sides of the control authority check: state-changing control is
     * refused on even-sized inputs. */
    g_server->peer_admin = (int)(size & 1);
    gbi_handle_frame(g_server, (const uint8_t *)"fuzz", 4, 0, data, size);
    for (int i = 0; i < 1000 && gbi_pump(g_server); i++)
        ;
    gbi_flush(g_server);
    /* Inputs may deactivate or terminate grain types: start afresh so that
     * each input meets a serving bridge and held frames cannot pile up. */
    int reset = 0;
    for (size_t i = 0; i < g_engine->n_types; i++) {
        gb_rk_t *rk = g_engine->types[i].rk;
        if (rk && (gb_rk_state_of(rk) != GB_RK_RUNNING || gb_rk_in_flight(rk) || g_server->rings[i].held_head))
            reset = 1;
        else if (rk)
            gb_rk_activate(rk, 1000);
    }
    if (reset) {
        stop();
        start();
    }
    return 0;
}
