#include "ipc_file.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void gb_ipc_files_note(gb_ipc_files_t *files, const char *endpoint)
{
    static const char scheme[] = "ipc://";
    if (strncmp(endpoint, scheme, sizeof scheme - 1) != 0)
        return;
    const char *path = endpoint + sizeof scheme - 1;
    if (path[0] == '@' || path[0] == '\0' || strcmp(path, "*") == 0)
        return; /* abstract (no file) or a wildcard (libzmq removes it) */
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
