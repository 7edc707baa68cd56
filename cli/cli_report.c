/* cli_report.c - what the programs say after parsing: clashing paths, a
 * failed library call, an unwritable summary, and the exit status of each
 * (cli.h). */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "tf/util.h"

int tf_cli_bad_value(const char *prog, const char *option, const char *what, const char *value)
{
    fprintf(stderr, "%s: %s: expected %s, got \"%s\"\n", prog, option, what, value);
    return TF_EXIT_USAGE;
}

int tf_cli_distinct(const char *prog, const char *what_a, const char *a, const char *what_b,
                    const char *b)
{
    if (!a || !b || !tf_same_file(a, b))
        return 0;
    /* Devices are written into, never replaced: two outputs on /dev/null
     * lose nothing. */
    struct stat st;
    if (stat(a, &st) == 0 && S_ISCHR(st.st_mode))
        return 0;
    fprintf(stderr, "%s: %s and %s are the same file, %s\n", prog, what_a, what_b, a);
    return TF_EXIT_USAGE;
}

int tf_cli_finish_stdout(const char *prog)
{
    /* fflush reports a failure even when the data went out in an earlier,
     * implicit flush (then only as "write error": that write's errno is
     * gone). */
    errno = 0;
    int failed = fflush(stdout) != 0 || ferror(stdout);
    if (!failed)
        return 0;
    fprintf(stderr, "%s: cannot write the summary to stdout: %s\n", prog,
            errno ? strerror(errno) : "write error");
    return TF_EXIT_INPUT;
}

void tf_cli_report(const char *prog, int rc, const tf_error *err)
{
    fprintf(stderr, "%s: %s\n", prog, err && err->msg[0] ? err->msg : tf_strerror(rc));
}

int tf_cli_status(int rc)
{
    if (rc == 0)
        return 0;
    return rc == TF_ESOLVER ? TF_EXIT_SOLVER : TF_EXIT_INPUT;
}
