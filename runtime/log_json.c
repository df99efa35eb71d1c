/* JSON lines for gb_log (log_format = "json"): one object per line, every
 * string escaped so that any message, whatever bytes a client sent, parses. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

static _Atomic int g_format = GB_LOG_TEXT;
static const char *const g_format_names[] = {"text", "json"};

void gb_log_set_format(gb_log_format format) { atomic_store(&g_format, (int)format); }
gb_log_format gb_log_get_format(void) { return (gb_log_format)atomic_load(&g_format); }

const char *gb_log_format_name(gb_log_format format)
{
    return (unsigned)format <= GB_LOG_JSON ? g_format_names[format] : "?";
}

int gb_log_format_parse(const char *name, gb_log_format *out)
{
    for (int i = 0; i <= GB_LOG_JSON; i++) {
        if (name && strcmp(name, g_format_names[i]) == 0) {
            *out = (gb_log_format)i;
            return 0;
        }
    }
    return -1;
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 when it is not one
 * (overlong forms, surrogates and code points past U+10FFFF included). */
static size_t utf8_len(const unsigned char *p)
{
    unsigned c = p[0];
    size_t n;
    unsigned min, cp;
    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0) { n = 2; min = 0x80; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { n = 3; min = 0x800; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { n = 4; min = 0x10000; cp = c & 0x07; }
    else return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0; /* also stops at the NUL */
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

/* Appends the JSON string literal of s at buf[*at], keeping room for `keep`
 * more bytes; stops early (still a closed literal) when out of room. */
static void put_string(char *buf, size_t cap, size_t *at, size_t keep, const char *s)
{
    size_t o = *at;
    const size_t end = cap - keep - 1; /* room for the closing quote */
    buf[o++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        char esc[8];
        const char *out = esc;
        size_t n = 1, len;
        switch (*p) {
        case '"': out = "\\\""; break;
        case '\\': out = "\\\\"; break;
        case '\n': out = "\\n"; break;
        case '\r': out = "\\r"; break;
        case '\t': out = "\\t"; break;
        default:
            if (*p < 0x20 || *p == 0x7F) {
                snprintf(esc, sizeof esc, "\\u%04x", *p);
            } else if ((n = utf8_len(p)) == 0) {
                out = "\\ufffd";
                n = 1;
            } else {
                out = NULL;
            }
        }
        len = out ? strlen(out) : n;
        if (o + len > end)
            break;
        if (out)
            memcpy(buf + o, out, len);
        else
            memcpy(buf + o, p, n);
        o += len;
        p += n;
    }
    buf[o++] = '"';
    *at = o;
}

size_t gb_log_json_line(char *buf, size_t cap, const char *time, const char *level,
                        const char *msg)
{
    /* Fixed parts: {"time":,"level":,"program":"gpubridge","message":}\n and
     * three empty literals; below that nothing useful fits. */
    static const char k_time[] = "{\"time\":", k_level[] = ",\"level\":",
                      k_msg[] = ",\"program\":\"gpubridge\",\"message\":";
    if (cap < 128) {
        if (cap)
            buf[0] = '\0';
        return 0;
    }
    size_t at = 0;
    memcpy(buf + at, k_time, sizeof k_time - 1);
    at += sizeof k_time - 1;
    put_string(buf, cap, &at, 100, time);
    memcpy(buf + at, k_level, sizeof k_level - 1);
    at += sizeof k_level - 1;
    put_string(buf, cap, &at, 80, level);
    memcpy(buf + at, k_msg, sizeof k_msg - 1);
    at += sizeof k_msg - 1;
    put_string(buf, cap, &at, 3, msg);
    buf[at++] = '}';
    buf[at++] = '\n';
    buf[at] = '\0';
    return at;
}
