/* fuzz_util.c - the scratch directory of the fuzz targets (fuzz_util.h). */
#include "fuzz_util.h"

#include <unistd.h>

static char scratch[256];

static void remove_scratch(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", scratch);
}

const char *fuzz_scratch_path(const char *name, char *path_out, size_t size)
{
    if (!scratch[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(scratch, sizeof scratch, "%s/tf_fuzz.XXXXXX", tmp ? tmp : "/tmp");
        if (!mkdtemp(scratch))
            abort();
        atexit(remove_scratch);
    }
    snprintf(path_out, size, "%s/%s", scratch, name);
    return path_out;
}

void fuzz_write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        abort();
}
