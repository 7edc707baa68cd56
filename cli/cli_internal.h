/* cli_internal.h - what the files of tfcli share and its programs do not. */
#ifndef TF_CLI_INTERNAL_H
#define TF_CLI_INTERNAL_H

#include "cli.h"

/* Does row o take a value on the command line (every option kind but
 * FLAG; LIST's is optional)? */
int cli_takes_value(const tf_cli_option *o);

/* Is row o an option (not a SECTION nor an operand)? */
int cli_is_option(const tf_cli_option *o);

/* Reads text into field as row o's kind says (FLAG, LIST and the operand
 * kinds are stored by cli.c, not here).  Returns 0, or -1 with what the row
 * takes worded into expected ("an integer in [1, 1024]"), for "expected
 * WHAT, got "TEXT"". */
int cli_read_value(const tf_cli_option *o, const char *text, void *field, char *expected,
                   size_t cap);

/* The row's choices joined by sep and, before the last, last (", " and
 * " or " for a message; "|" and "|" for --help) into out. */
void cli_join_choices(const tf_cli_choice *choices, const char *sep, const char *last,
                      char *out, size_t cap);

#endif
