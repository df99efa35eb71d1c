/* Logging to stderr with a timestamp and a level. Thread-safe (one fprintf per line). */
#ifndef GB_LOG_H
#define GB_LOG_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gb_log_level {
    GB_LOG_ERROR = 0,
    GB_LOG_WARN,
    GB_LOG_INFO,
    GB_LOG_DEBUG,
    GB_LOG_DIAG, /* very chatty: per-launch and per-message traces */
} gb_log_level;

void gb_log_set_level(gb_log_level level);
gb_log_level gb_log_get_level(void);
/* Parses "error|warn|info|debug|diag"; returns 0 on success, -1 if unknown. */
int gb_log_level_parse(const char *name, gb_log_level *out);
const char *gb_log_level_name(gb_log_level level);

/* Line format: text (default) or JSON lines for log shippers (log_json.c). */
typedef enum gb_log_format {
    GB_LOG_TEXT = 0,
    GB_LOG_JSON,
} gb_log_format;

void gb_log_set_format(gb_log_format format);
gb_log_format gb_log_get_format(void);
/* Parses "text|json"; returns 0 on success, -1 if unknown. */
int gb_log_format_parse(const char *name, gb_log_format *out);
const char *gb_log_format_name(gb_log_format format);
/* One JSON object {"time":..,"level":..,"program":"gpubridge","message":..}
 * and a newline into buf (cap bytes, NUL-terminated; truncated messages stay
 * valid JSON). Bytes that are not valid UTF-8 become U+FFFD. Returns the
 * length written. */
size_t gb_log_json_line(char *buf, size_t cap, const char *time, const char *level,
                        const char *msg);

void gb_log(gb_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#define GB_ERROR(...) gb_log(GB_LOG_ERROR, __VA_ARGS__)
#define GB_WARN(...) gb_log(GB_LOG_WARN, __VA_ARGS__)
#define GB_INFO(...) gb_log(GB_LOG_INFO, __VA_ARGS__)
#define GB_DEBUG(...) \
    do { if (gb_log_get_level() >= GB_LOG_DEBUG) gb_log(GB_LOG_DEBUG, __VA_ARGS__); } while (0)
#define GB_DIAG(...) \
    do { if (gb_log_get_level() >= GB_LOG_DIAG) gb_log(GB_LOG_DIAG, __VA_ARGS__); } while (0)

#ifdef __cplusplus
}
#endif
#endif
