#include "ipc_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* The file path of an ipc:// endpoint; NULL when it has none (another
 * transport, an abstract socket, a wildcard, which libzmq names itself). */
static const char *ipc_path(const char *endpoint)
{
    static const char scheme[] = "ipc://";
    if (strncmp(endpoint, scheme, sizeof scheme - 1) != 0)
        return NULL;
    const char *path = endpoint + sizeof scheme - 1;
    if (path[0] == '@' || path[0] == '\0' || strcmp(path, "*") == 0)
        return NULL;
    return path;
}

int gb_ipc_check_free(const char *endpoint, char *why, size_t whylen)
{
    const char *path = ipc_path(endpoint);
    struct stat st;
    if (!path || lstat(path, &st) != 0)
        return 0; /* libzmq says what else is wrong */
    if (!S_ISSOCK(st.st_mode)) {
        snprintf(why, whylen, "cannot bind %s: %s exists and is not a socket (binding would delete it)", endpoint,
                 path);
        return -1;
    }
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path)
        return 0; /* too long for any socket: libzmq refuses it */
    memcpy(a.sun_path, path, strlen(path) + 1);
    /* Non-blocking: a listener with a full backlog says EAGAIN, not a wait. */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(why, whylen, "cannot bind %s: cannot probe the socket there (%s)", endpoint, strerror(errno));
        return -1;
    }
    int rc = connect(fd, (struct sockaddr *)&a, sizeof a);
    int e = errno;
    close(fd);
    if (rc != 0 && (e == ECONNREFUSED || e == ENOENT))
        return 0; /* nobody listens: the file is stale (or just went) */
    if (rc == 0 || e == EAGAIN || e == EINPROGRESS || e == EPROTOTYPE)
        snprintf(why, whylen, "cannot bind %s: another process listens there (a bridge already running?); stop "
                 "it, or choose another path", endpoint);
    else
        snprintf(why, whylen, "cannot bind %s: a socket is there that this process cannot probe (%s); remove it "
                 "if nothing uses it, or choose another path", endpoint, strerror(e));
    return -1;
}

void gb_ipc_files_note(gb_ipc_files_t *files, const char *endpoint)
{
    const char *path = ipc_path(endpoint);
    if (!path)
        return;
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISSOCK(st.st_mode))
        return;
    gb_ipc_file_t *f = realloc(files->f, (files->n + 1) * sizeof *f);
    if (!f)
        return;
    files->f = f;
    char *copy = strdup(path);
    if (!copy)
        return;
    files->f[files->n++] = (gb_ipc_file_t){.path = copy, .dev = st.st_dev, .ino = st.st_ino};
}

void gb_ipc_files_remove(gb_ipc_files_t *files)
{
    for (size_t i = 0; i < files->n; i++) {
        struct stat st;
        if (lstat(files->f[i].path, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == files->f[i].dev &&
            st.st_ino == files->f[i].ino)
            unlink(files->f[i].path);
        free(files->f[i].path);
    }
    free(files->f);
    files->f = NULL;
    files->n = 0;
}
