/* temp_dir.h - scratch folders of the unit tests (cmocka; include
 * test_util.h first). */
#ifndef TF_TEMP_DIR_H
#define TF_TEMP_DIR_H

#include <stdio.h>
#include <stdlib.h>

/* Creates a fresh folder "/tmp/<prefix>XXXXXX" and writes its path to dir
 * (size bytes); fails the test when it cannot. */
static inline void temp_dir_make(const char *prefix, char *dir, size_t size)
{
    snprintf(dir, size, "/tmp/%sXXXXXX", prefix);
    if (!mkdtemp(dir))
        fail_msg("mkdtemp %s failed", dir);
}

/* Removes dir with everything in it.  A folder left behind does not fail
 * the test; it is reported. */
static inline void temp_dir_remove(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        print_message("could not remove %s\n", dir);
}

#endif
