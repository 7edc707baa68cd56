/* test_json_util.c - the JSON helper's checks that every reader shares:
 * unknown and repeated fields, the nearest known name, "meta", and format
 * versions (older read, newer refused). */
#include <cjson/cJSON.h>

#include "json_util.h"
#include "test_util.h"

static const char *const known[] = {"forward_ms", "backward_ms", "backward_frozen_ms", "ms",
                                    "stage",      NULL};

/* The message tfj_check_fields gives for the object text (0 if none). */
static int check_text(const char *text, tf_error *err)
{
    cJSON *o = cJSON_Parse(text);
    assert_non_null(o);
    tfj_ctx ctx = {.where = "f.json", .path = "$.stages[2]"};
    tf_error_clear(err);
    int rc = tfj_check_fields(&ctx, o, known, err);
    cJSON_Delete(o);
    return rc;
}

static void expect_message(const char *text, const char *message)
{
    tf_error err;
    if (check_text(text, &err) != TF_EINVAL)
        fail_msg("accepted: %s", text);
    assert_string_equal(err.msg, message);
}

static void known_fields_pass(void **state)
{
    (void)state;
    tf_error err;
    assert_int_equal(check_text("{}", &err), 0);
    assert_int_equal(check_text("{\"stage\": 1, \"ms\": null, \"forward_ms\": [1]}", &err), 0);
}

/* Within a quarter of the known name's length (1 to 3 edits), case
 * ignored, a swap of neighbours counting one. */
static void nearest_name(void **state)
{
    (void)state;
    expect_message("{\"backward_frozn_ms\": 1}",
                   "f.json: $.stages[2].backward_frozn_ms: unknown field (did you mean "
                   "backward_frozen_ms?)");
    expect_message("{\"backward_forzen_ms\": 1}",
                   "f.json: $.stages[2].backward_forzen_ms: unknown field (did you mean "
                   "backward_frozen_ms?)");
    expect_message("{\"Forward_MS\": 1}",
                   "f.json: $.stages[2].Forward_MS: unknown field (did you mean forward_ms?)");
    /* forward_ms (10 characters) takes 2 edits, not 3. */
    expect_message("{\"forwrd_m\": 1}",
                   "f.json: $.stages[2].forwrd_m: unknown field (did you mean forward_ms?)");
    tf_error err;
    assert_int_equal(check_text("{\"fward_m\": 1}", &err), TF_EINVAL);
    assert_contains(err.msg, "$.stages[2].fward_m: unknown field (known fields here: "
                             "forward_ms, backward_ms, backward_frozen_ms, ms, stage;");
    /* backward_frozen_ms (18 characters) takes 3 edits, not 4. */
    expect_message("{\"bakward_frzen_m\": 1}",
                   "f.json: $.stages[2].bakward_frzen_m: unknown field (did you mean "
                   "backward_frozen_ms?)");
    assert_int_equal(check_text("{\"bakwrd_frzen_m\": 1}", &err), TF_EINVAL);
    assert_contains(err.msg, "(known fields here:");
    /* ms (2 characters) takes 1 edit. */
    expect_message("{\"m\": 1}", "f.json: $.stages[2].m: unknown field (did you mean ms?)");
    assert_int_equal(check_text("{\"id\": 1}", &err), TF_EINVAL);
    assert_contains(err.msg, "(known fields here:");
    expect_message("{\"backward_m\": 1}",
                   "f.json: $.stages[2].backward_m: unknown field (did you mean backward_ms?)");
    expect_message("{\"stages\": []}",
                   "f.json: $.stages[2].stages: unknown field (did you mean stage?)");
}

/* The first unknown field is named; a repeated one too, since only the
 * first of two would be read. */
static void repeated_and_first(void **state)
{
    (void)state;
    expect_message("{\"stage\": 1, \"ms\": 2, \"stage\": 3}",
                   "f.json: $.stages[2].stage: the field is given twice (an object names each "
                   "field once)");
    tf_error err;
    assert_int_equal(check_text("{\"ms\": 1, \"colour\": 2, \"frozn\": 3}", &err), TF_EINVAL);
    assert_contains(err.msg, "$.stages[2].colour:");
    assert_int_equal(check_text("[1]", &err), TF_EINVAL);
    assert_contains(err.msg, "$.stages[2]: expected an object");
}

/* A key that is huge or holds control characters is shown cut and
 * printable, and costs no more than a short one. */
static void odd_keys(void **state)
{
    (void)state;
    size_t n = 100000;
    char *text = malloc(n + 16);
    assert_non_null(text);
    strcpy(text, "{\"");
    memset(text + 2, 'x', n);
    strcpy(text + 2 + n, "\": 1}");
    tf_error err;
    assert_int_equal(check_text(text, &err), TF_EINVAL);
    char shown[128] = "$.stages[2].";
    memset(shown + strlen(shown), 'x', 60); /* the key cut to 60 characters */
    strcat(shown, "...: unknown field (known fields here:");
    assert_contains(err.msg, shown);
    free(text);
    expect_message("{\"m\\u0001s\\n\": 1}",
                   "f.json: $.stages[2].m?s?: unknown field (known fields here: forward_ms, "
                   "backward_ms, backward_frozen_ms, ms, stage; notes belong in the top level's "
                   "\"meta\")");
}

/* A format at version 3 with one field of its own. */
static const char *const own_fields[] = {"ranks", NULL};
static const tfj_format format_v3 = {
    .name = "tf-test", .required = 1, .version = 3, .fields = own_fields};

static int check_document(const char *text, int *version, tf_error *err)
{
    cJSON *root = cJSON_Parse(text);
    assert_non_null(root);
    tfj_ctx ctx = {.where = "t.json", .path = "$"};
    tf_error_clear(err);
    int rc = tfj_check_document(&ctx, root, &format_v3, version, err);
    cJSON_Delete(root);
    return rc;
}

static void versions(void **state)
{
    (void)state;
    tf_error err;
    int version = 0;
    for (int v = 1; v <= 3; v++) {
        char text[96];
        snprintf(text, sizeof text, "{\"format\": \"tf-test\", \"version\": %d, \"ranks\": 2}", v);
        assert_int_equal(check_document(text, &version, &err), 0);
        assert_int_equal(version, v);
    }
    assert_int_equal(check_document("{\"format\": \"tf-test\", \"version\": 4}", &version, &err),
                     TF_EINVAL);
    assert_string_equal(err.msg, "t.json: $.version: version 4 is newer than the tf-test version "
                                 "this toolkit reads (3): upgrade the toolkit");
    /* Newer is said before any field it may have added. */
    assert_int_equal(check_document("{\"format\": \"tf-test\", \"version\": 9, \"layers\": 1}",
                                    &version, &err),
                     TF_EINVAL);
    assert_contains(err.msg, "version 9 is newer");
    assert_int_equal(check_document("{\"format\": \"tf-test\", \"version\": 0}", &version, &err),
                     TF_EINVAL);
    assert_contains(err.msg, "$.version: expected an integer in [1, ");
    /* Required here, and a misspelling of it named as such. */
    assert_int_equal(check_document("{\"format\": \"tf-test\", \"versoin\": 3}", &version, &err),
                     TF_EINVAL);
    assert_contains(err.msg, "$.versoin: unknown field (did you mean version?)");
    assert_int_equal(check_document("{\"format\": \"tf-test\"}", &version, &err), TF_EINVAL);
    assert_contains(err.msg, "$.version: an integer is required, but it is missing");
    assert_int_equal(check_document("{\"version\": 3}", &version, &err), TF_EINVAL);
    assert_contains(err.msg, "$.format: a string is required, but it is missing");
    assert_int_equal(check_document("{\"format\": \"tf-plan\", \"version\": 1}", &version, &err),
                     TF_EINVAL);
    assert_contains(err.msg, "$.format: expected \"tf-test\", got \"tf-plan\"");
    assert_int_equal(check_document("[]", &version, &err), TF_EINVAL);
    assert_contains(err.msg, "$: expected a JSON object (a tf-test file)");
}

/* "meta" is an object holding anything, checked for nothing else. */
static void meta(void **state)
{
    (void)state;
    tf_error err;
    int version;
    assert_int_equal(check_document("{\"format\": \"tf-test\", \"version\": 1, \"meta\": "
                                    "{\"rnaks\": [1, {\"\": null}], \"meta\": 1, \"x\": \"y\"}}",
                                    &version, &err),
                     0);
    assert_int_equal(check_document("{\"format\": \"tf-test\", \"version\": 1, \"meta\": null}",
                                    &version, &err),
                     0);
    assert_int_equal(check_document("{\"format\": \"tf-test\", \"version\": 1, \"meta\": \"x\"}",
                                    &version, &err),
                     TF_EINVAL);
    assert_contains(err.msg, "t.json: $.meta: expected an object, got \"x\"");
    assert_int_equal(check_document("{\"format\": \"tf-test\", \"version\": 1, \"rnaks\": 2}",
                                    &version, &err),
                     TF_EINVAL);
    assert_contains(err.msg, "t.json: $.rnaks: unknown field (did you mean ranks?)");
    /* Nested objects get no meta of their own: notes go at the top. */
    assert_int_equal(check_text("{\"meta\": {}}", &err), TF_EINVAL);
    assert_contains(err.msg, "$.stages[2].meta: unknown field (known fields here:");
    assert_contains(err.msg, "notes belong in the top level's \"meta\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(known_fields_pass), cmocka_unit_test(nearest_name),
        cmocka_unit_test(repeated_and_first), cmocka_unit_test(odd_keys),
        cmocka_unit_test(versions),          cmocka_unit_test(meta),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
