/* model_parameters.c - a program against the installed executor library:
 * prints the parameter count of tf-exec's default model. */
#include <stdio.h>

#include "tfx/model.h"

int main(void)
{
    tfx_model_config c;
    tfx_model_layout l;
    tf_error err = {0};
    tfx_model_config_default(&c);
    if (tfx_model_layout_build(&c, 2, &l, &err) != 0) {
        fprintf(stderr, "model_parameters: %s\n", err.msg);
        return 1;
    }
    printf("%.0f\n", tfx_model_parameter_count(&l, -1));
    tfx_model_layout_free(&l);
    return 0;
}
