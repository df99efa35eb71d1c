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

/* Rate limiting for lines a peer can cause at will (refused handshakes):
 * at most `burst` lines per `window_ns`; the first line after a window that
 * dropped some says how many. One gb_log_rate_t per call site, zero-filled. */
typedef struct gb_log_rate {
    unsigned long long window_start_ns;
    unsigned n_in_window;
    unsigned long long suppressed;
    int lock; /* a spin flag: call sites may be on several threads */
} gb_log_rate_t;

#define GB_LOG_RATE_BURST 10
#define GB_LOG_RATE_WINDOW_NS 10000000000ull

/* Whether a line may go out at time now_ns; *dropped gets how many were
 * suppressed since the last line that went out (0 mostly). */
int gb_log_rate_allow(gb_log_rate_t *r, unsigned long long now_ns, unsigned burst,
                      unsigned long long window_ns, unsigned long long *dropped);

/* gb_log through limiter r (GB_LOG_RATE_BURST per GB_LOG_RATE_WINDOW_NS). */
void gb_log_limited(gb_log_rate_t *r, gb_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#define GB_WARN_LIMITED(...)                                  \
    do {                                                      \
        static gb_log_rate_t gb_rate_;                        \
        gb_log_limited(&gb_rate_, GB_LOG_WARN, __VA_ARGS__);  \
    } while (0)

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
