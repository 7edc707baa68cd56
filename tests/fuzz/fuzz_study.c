/* fuzz_study.c - libFuzzer target for study.json (tf_study_parse): an
 * accepted study must list its configurations, and the first and last of
 * them must each build a profile or be skipped with a reason. */
#include "fuzz_util.h"
#include "study/study.h"
#include "tf/profile.h"

static void check_config(const tf_study *s, const tf_study_config *c)
{
    tf_profile p;
    tf_error err = {0};
    int rc = tf_study_make_profile(s, c, &p, &err);
    if (rc == 0)
        tf_profile_free(&p);
    else
        FUZZ_CHECK(rc == TF_EINVAL && err.msg[0], "configuration failed with %d: %s", rc,
                   err.msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    tf_study s;
    tf_error err = {0};
    /* "where" sits in a directory that does not exist, so a "profile" named
     * by a relative path is not found rather than read from the tree. */
    if (tf_study_parse(text, "/nonexistent/fuzz/study.json", &s, &err) == 0) {
        tf_study_config *configs;
        int n;
        FUZZ_CHECK(tf_study_configs(&s, &configs, &n, &err) == 0, "%s", err.msg);
        FUZZ_CHECK(n >= 1 && n <= TF_STUDY_MAX_CONFIGS, "%d configurations", n);
        check_config(&s, &configs[0]);
        check_config(&s, &configs[n - 1]);
        free(configs);
        tf_study_free(&s);
    } else {
        FUZZ_CHECK(err.msg[0] != '\0', "refused without a message");
    }
    free(text);
    return 0;
}
