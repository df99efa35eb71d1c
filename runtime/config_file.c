/* Config and key files: regular files only, size-capped, read without
 * blocking; and a scan of config text ahead of libconfig. */
#include "config_file.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *file_kind(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISSOCK(m))
        return "a socket";
    if (S_ISCHR(m) || S_ISBLK(m))
        return "a device";
    return "not a regular file";
}

gb_err gbi_read_regular_file(const char *path, const char *what, size_t max, char **out, size_t *len,
                             char *err, size_t errlen)
{
    *out = NULL;
    *len = 0;
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return GB_ERR_IO;
    }
    return gbi_read_regular_fd(fd, path, what, max, out, len, err, errlen);
}

gb_err gbi_read_regular_fd(int fd, const char *path, const char *what, size_t max, char **out, size_t *len,
                           char *err, size_t errlen)
{
    *out = NULL;
    *len = 0;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        snprintf(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return GB_ERR_IO;
    }
    if (!S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "%s: is %s; the %s must be a regular file", path, file_kind(sb.st_mode), what);
        close(fd);
        return GB_ERR_CONFIG;
    }
    if ((uintmax_t)sb.st_size > max) {
        snprintf(err, errlen, "%s: %jd bytes; a %s holds at most %zu", path, (intmax_t)sb.st_size, what, max);
        close(fd);
        return GB_ERR_CONFIG;
    }
    char *buf = malloc(max + 1);
    size_t n = 0;
    ssize_t r = 1;
    while (buf && n <= max && (r = read(fd, buf + n, max + 1 - n)) > 0)
        n += (size_t)r;
    int e = errno;
    close(fd);
    if (!buf || r < 0) {
        snprintf(err, errlen, "%s: cannot read: %s", path, buf ? strerror(e) : "out of memory");
        free(buf);
        return buf ? GB_ERR_IO : GB_ERR_NOMEM;
    }
    if (n > max) { /* it grew while we read it */
        snprintf(err, errlen, "%s: more than %zu bytes; a %s holds at most that", path, max, what);
        free(buf);
        return GB_ERR_CONFIG;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return GB_OK;
}

typedef struct scan {
    const char *p, *end;
    int line;
    const char *line_start;
} scan_t;

static int scan_fail(const scan_t *s, const char *name, char *err, size_t errlen, const char *what)
{
    snprintf(err, errlen, "%s:%d: %s", name, s->line, what);
    return -1;
}

/* An integer literal at s->p (libconfig: [-+]?[0-9]+L?, 0x[0-9A-Fa-f]+L?):
 * 0 when it fits (or is not an integer: a float), else the bits it does not
 * fit in: 64, or 32 without the L suffix (libconfig 1.5 wraps those to 32
 * bits silently). */
static int integer_fits(scan_t *s)
{
    const char *q = s->p;
    int neg = 0;
    if (*q == '-' || *q == '+')
        neg = *q++ == '-';
    uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    int over = 0;
    if (q[0] == '0' && (q[1] == 'x' || q[1] == 'X') && isxdigit((unsigned char)q[2])) {
        for (q += 2; q < s->end && isxdigit((unsigned char)*q); q++) {
            int d = isdigit((unsigned char)*q) ? *q - '0' : (tolower((unsigned char)*q) - 'a' + 10);
            over |= v > (UINT64_MAX >> 4);
            v = v << 4 | (uint64_t)d;
        }
        over |= v > (uint64_t)INT64_MAX; /* libconfig would make it negative */
        neg = 0;
    } else {
        for (; q < s->end && isdigit((unsigned char)*q); q++) {
            int d = *q - '0';
            over |= v > (limit - (uint64_t)d) / 10;
            v = v * 10 + (uint64_t)d;
        }
        if (q < s->end && (*q == '.' || *q == 'e' || *q == 'E')) {
            s->p = q;
            return 0; /* a float */
        }
    }
    s->p = q;
    if (over)
        return 64;
    if (q < s->end && (*q == 'L' || *q == 'l'))
        return 0;
    return v > (neg ? (uint64_t)INT32_MAX + 1 : (uint64_t)INT32_MAX) ? 32 : 0;
}

static int is_word(char c) { return isalnum((unsigned char)c) || c == '_' || c == '*' || c == '-'; }

int gbi_config_prescan(const char *text, size_t len, const char *name, char *err, size_t errlen)
{
    scan_t s = {text, text + len, 1, text};
    char msg[160];
    if (memchr(text, '\0', len))
        return snprintf(err, errlen, "%s: contains a NUL byte; not a text file", name), -1;
    while (s.p < s.end) {
        char c = *s.p;
        if (c == '\n') {
            s.p++;
            s.line++;
            s.line_start = s.p;
            continue;
        }
        if (s.p - s.line_start >= GBI_TOKEN_MAX) {
            snprintf(msg, sizeof msg, "line longer than %d characters", GBI_TOKEN_MAX);
            return scan_fail(&s, name, err, errlen, msg);
        }
        if (c == '"') { /* a string literal; it may span lines */
            const char *start = ++s.p;
            int line = s.line;
            while (s.p < s.end && *s.p != '"') {
                if (*s.p == '\\' && s.p + 1 < s.end)
                    s.p++;
                if (*s.p == '\n') {
                    s.line++;
                    s.line_start = s.p + 1;
                }
                s.p++;
            }
            if (s.p - start > GBI_TOKEN_MAX) {
                s.line = line;
                snprintf(msg, sizeof msg, "string longer than %d characters", GBI_TOKEN_MAX);
                return scan_fail(&s, name, err, errlen, msg);
            }
            s.p += s.p < s.end;
        } else if (c == '#' || (c == '/' && s.p + 1 < s.end && s.p[1] == '/')) {
            while (s.p < s.end && *s.p != '\n')
                s.p++; /* the line length check still applies: see the top */
            if (s.p - s.line_start > GBI_TOKEN_MAX) {
                snprintf(msg, sizeof msg, "line longer than %d characters", GBI_TOKEN_MAX);
                return scan_fail(&s, name, err, errlen, msg);
            }
        } else if (c == '/' && s.p + 1 < s.end && s.p[1] == '*') {
            for (s.p += 2; s.p < s.end && !(s.p[0] == '*' && s.p + 1 < s.end && s.p[1] == '/'); s.p++)
                if (*s.p == '\n') {
                    s.line++;
                    s.line_start = s.p + 1;
                }
            s.p += s.p < s.end ? 2 : 0;
        } else if (c == '@' && strncmp(s.p, "@include", 8) == 0) {
            return scan_fail(&s, name, err, errlen, "@include is not supported: give the whole "
                                                    "configuration in one file");
        } else if (isdigit((unsigned char)c) ||
                   ((c == '-' || c == '+') && s.p + 1 < s.end && isdigit((unsigned char)s.p[1]))) {
            const char *start = s.p;
            int bits = integer_fits(&s);
            if (bits) {
                int n = (int)(s.p - start);
                snprintf(msg, sizeof msg, "integer %.*s%s does not fit in %d bits%s", n > 40 ? 40 : n, start,
                         n > 40 ? "..." : "", bits, bits == 32 ? " (write it with an L suffix for 64 bits)" : "");
                return scan_fail(&s, name, err, errlen, msg);
            }
            while (s.p < s.end && is_word(*s.p))
                s.p++;
        } else if (is_word(c)) {
            while (s.p < s.end && (is_word(*s.p) || *s.p == '.'))
                s.p++; /* a name: digits in it are no number */
        } else {
            s.p++;
        }
    }
    if (s.p - s.line_start > GBI_TOKEN_MAX) {
        snprintf(msg, sizeof msg, "line longer than %d characters", GBI_TOKEN_MAX);
        return scan_fail(&s, name, err, errlen, msg);
    }
    return 0;
}

/* The setting names of line [p, end): names followed by '=' or ':',
 * outside strings and comments; at most max of them, as (start, length). */
#define GBI_LINE_KEYS 64
typedef struct gbi_key_ref {
    const char *at;
    size_t len;
} gbi_key_ref;

static size_t line_keys(const char *p, const char *end, gbi_key_ref *keys, size_t max)
{
    size_t n = 0;
    while (p < end && n < max) {
        if (*p == '"') { /* a string: to its closing quote */
            for (p++; p < end && *p != '"'; p++)
                if (*p == '\\' && p + 1 < end)
                    p++;
            p++;
        } else if (*p == '#' || (*p == '/' && p + 1 < end && p[1] == '/')) {
            break;
        } else if (isalpha((unsigned char)*p) || *p == '_' || *p == '*') {
            const char *w = p;
            while (p < end && (isalnum((unsigned char)*p) || *p == '_' || *p == '-' || *p == '*'))
                p++;
            const char *q = p;
            while (q < end && (*q == ' ' || *q == '\t'))
                q++;
            if (q < end && (*q == '=' || *q == ':'))
                keys[n++] = (gbi_key_ref){w, (size_t)(p - w)};
        } else {
            p++;
        }
    }
    return n;
}

static bool key_in(const gbi_key_ref *keys, size_t n, gbi_key_ref k)
{
    for (size_t i = 0; i < n; i++)
        if (keys[i].len == k.len && memcmp(keys[i].at, k.at, k.len) == 0)
            return true;
    return false;
}

/* libconfig gives a duplicate's line, not its name: of the names set on
 * that line, the first set twice on it, else the first set on an earlier
 * line too, else the first. */
void gbi_config_key_at_line(const char *text, int line, char *out, size_t cap)
{
    out[0] = '\0';
    const char *start = text;
    for (int l = 1; l < line && text; l++) {
        text = strchr(text, '\n');
        text = text ? text + 1 : NULL;
    }
    if (!text || cap == 0)
        return;
    const char *eol = strchr(text, '\n');
    eol = eol ? eol : text + strlen(text);
    gbi_key_ref keys[GBI_LINE_KEYS], before[GBI_LINE_KEYS];
    const size_t n = line_keys(text, eol, keys, GBI_LINE_KEYS);
    if (n == 0)
        return;
    size_t pick = n;
    for (size_t i = 1; i < n && pick == n; i++)
        if (key_in(keys, i, keys[i]))
            pick = i;
    for (const char *p = start; pick == n && p < text;) { /* earlier lines */
        const char *e = strchr(p, '\n');
        e = e && e < text ? e : text;
        const size_t m = line_keys(p, e, before, GBI_LINE_KEYS);
        for (size_t i = 0; i < n && pick == n; i++)
            if (key_in(before, m, keys[i]))
                pick = i;
        p = e + 1;
    }
    const gbi_key_ref k = keys[pick == n ? 0 : pick];
    const size_t len = k.len < cap - 1 ? k.len : cap - 1;
    memcpy(out, k.at, len);
    out[len] = '\0';
}
