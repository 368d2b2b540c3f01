/* fuzz_util.c: scratch files for the fuzz harnesses (see fuzz.h). */
#include "fuzz.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define MAX_FILES 8

static struct {
    char tag[32];
    char path[512];
} files[MAX_FILES];
static int n_files;

static void remove_files(void)
{
    for (int i = 0; i < n_files; i++)
        unlink(files[i].path);
}

const char *fuzz_file(const char *tag, const char *suffix, const uint8_t *data, size_t size)
{
    int k = -1;
    for (int i = 0; i < n_files; i++)
        if (strcmp(files[i].tag, tag) == 0)
            k = i;
    if (k < 0) {
        if (n_files == MAX_FILES)
            return NULL;
        const char *dir = getenv("TMPDIR");
        k = n_files++;
        snprintf(files[k].tag, sizeof files[k].tag, "%s", tag);
        snprintf(files[k].path, sizeof files[k].path, "%s/txl-fuzz-%s-%ld%s",
                 dir && *dir ? dir : "/tmp", tag, (long)getpid(), suffix);
        if (n_files == 1)
            atexit(remove_files);
    }
    int fd = open(files[k].path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return NULL;
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) {
            close(fd);
            return NULL;
        }
        done += (size_t)w;
    }
    close(fd);
    return files[k].path;
}
