/* Socket files of ipc:// endpoints. libzmq leaves the file of an ipc
 * endpoint behind when its socket closes (it removes only those of wildcard
 * endpoints), and a client that finds the file waits for a bridge that is
 * gone instead of being told at once that nothing listens there. So the
 * files a process bound are noted with their device and inode after the
 * bind, and removed after the socket closed, each only while it is still
 * that file: one that another bridge bound since is left alone. */
#ifndef GB_IPC_FILE_H
#define GB_IPC_FILE_H

#include <stddef.h>
#include <sys/types.h>

typedef struct gb_ipc_file {
    char *path;
    dev_t dev;
    ino_t ino;
} gb_ipc_file_t;

typedef struct gb_ipc_files {
    gb_ipc_file_t *f;
    size_t n;
} gb_ipc_files_t;

/* Before zmq_bind of endpoint: libzmq unlinks whatever is at an ipc path
 * and binds anew, so a second bridge would take the socket of one that
 * serves there (and remove it when it stops), and an endpoint naming a
 * regular file would delete it. Returns 0 when endpoint is not an ipc path,
 * nothing is there, or a socket that refuses connections (left by a process
 * that was killed); else -1 with why (a sentence naming the path): a
 * listener of any socket type, a socket it may not connect to, not a socket.
 * Two processes that check at the same moment may both pass. */
int gb_ipc_check_free(const char *endpoint, char *why, size_t whylen);

/* After a successful zmq_bind of endpoint: notes its socket file when it is
 * an ipc:// endpoint with a file (not abstract, not a wildcard). Anything
 * else, and a failure to note it (the file then stays), is ignored. */
void gb_ipc_files_note(gb_ipc_files_t *files, const char *endpoint);

/* After the socket closed: removes each noted file that is still the one
 * bound, and forgets them all. */
void gb_ipc_files_remove(gb_ipc_files_t *files);

#endif
