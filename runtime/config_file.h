/* Internal to the config loader (config.c): reading a config or key file
 * safely, and checks on the text that libconfig does not make. */
#ifndef GB_CONFIG_FILE_H
#define GB_CONFIG_FILE_H

#include <stddef.h>

#include "error.h"

#define GBI_CONFIG_MAX_BYTES (1u << 20) /* a config file; the default one is about 6 KB */
#define GBI_TOKEN_MAX 4096 /* longest line or string literal: libconfig's scanner is quadratic in it */

/* Reads all of path, a regular file of at most max bytes, into a malloc'd
 * NUL-terminated buffer (*out, *len). Never blocks on a FIFO or device.
 * what names the file in messages ("config file", "curve.server_secret_key_file").
 * On error returns GB_ERR_IO or GB_ERR_CONFIG and writes a sentence into err. */
gb_err gbi_read_regular_file(const char *path, const char *what, size_t max, char **out, size_t *len,
                             char *err, size_t errlen);
/* The same from descriptor fd, opened from path (named in messages) with
 * O_NONBLOCK; fd is closed. */
gb_err gbi_read_regular_fd(int fd, const char *path, const char *what, size_t max, char **out, size_t *len,
                           char *err, size_t errlen);

/* Checks config text (len bytes) for what libconfig gets wrong or slow: a NUL
 * byte, a line or string literal over GBI_TOKEN_MAX, an integer literal that
 * does not fit in 64 bits, @include. Returns 0, or -1 with "name:line: what"
 * in err. */
int gbi_config_prescan(const char *text, size_t len, const char *name, char *err, size_t errlen);

/* The key set twice that line `line` of text names (for libconfig's
 * "duplicate setting name", which gives the line, not the name): of the
 * keys set on it, the first set twice on it, else the first set on an
 * earlier line too, else the first; copied into out, or out = "" when the
 * line sets none. */
void gbi_config_key_at_line(const char *text, int line, char *out, size_t cap);

#endif
