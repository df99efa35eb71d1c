#define _POSIX_C_SOURCE 200809L
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static _Atomic int g_level = GB_LOG_INFO;
static const char *const g_names[] = {"error", "warn", "info", "debug", "diag"};

void gb_log_set_level(gb_log_level level) { atomic_store(&g_level, (int)level); }
gb_log_level gb_log_get_level(void) { return (gb_log_level)atomic_load(&g_level); }

const char *gb_log_level_name(gb_log_level level)
{
    return (unsigned)level <= GB_LOG_DIAG ? g_names[level] : "?";
}

int gb_log_level_parse(const char *name, gb_log_level *out)
{
    for (int i = 0; i <= GB_LOG_DIAG; i++) {
        if (name && strcmp(name, g_names[i]) == 0) {
            *out = (gb_log_level)i;
            return 0;
        }
    }
    return -1;
}

void gb_log(gb_log_level level, const char *fmt, ...)
{
    if ((int)level > atomic_load(&g_level))
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    if (gb_log_get_format() == GB_LOG_JSON) {
        char when[96], line[1024 * 6 + 160];
        snprintf(when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
        gb_log_json_line(line, sizeof line, when, gb_log_level_name(level), msg);
        fputs(line, stderr); /* one call per line, as below */
        return;
    }
    /* One fprintf per line so that lines from several threads do not interleave. */
    fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ %-5s gpubridge: %s\n",
            tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
            ts.tv_nsec / 1000, gb_log_level_name(level), msg);
}
