/* test_exec_launch_env.c - reading the launcher's rank variables (torchrun,
 * Open MPI, MPICH/PMI, Slurm) for the launched mode, whose processes meet
 * over the socket transport (and NCCL with the CUDA backend).  Plain C: in
 * every build. */
#include <stdlib.h>

#include "test_util.h"
#include "tfx/launch.h"

static const char *ALL_VARS[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "SLURM_PROCID",
    "SLURM_NTASKS", "SLURM_LOCALID"};

static int clear_env(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof ALL_VARS / sizeof ALL_VARS[0]; i++)
        unsetenv(ALL_VARS[i]);
    return 0;
}

static void test_not_launched(void **state)
{
    (void)state;
    tfx_launch_env e;
    assert_int_equal(tfx_launch_env_read(&e, NULL), 0);
    assert_int_equal(e.launched, 0);
    assert_int_equal(e.rank, 0);
    assert_int_equal(e.world_size, 1);
    assert_int_equal(e.local_rank, -1);
}

static void test_torchrun(void **state)
{
    (void)state;
    tfx_launch_env e;
    setenv("RANK", "3", 1);
    setenv("WORLD_SIZE", "4", 1);
    setenv("LOCAL_RANK", "1", 1);
    setenv("SLURM_PROCID", "0", 1); /* the first launcher in the list wins */
    setenv("SLURM_NTASKS", "1", 1);
    assert_int_equal(tfx_launch_env_read(&e, NULL), 0);
    assert_int_equal(e.launched, 1);
    assert_int_equal(e.rank, 3);
    assert_int_equal(e.world_size, 4);
    assert_int_equal(e.local_rank, 1);
    assert_string_equal(e.source, "RANK");
}

static void test_openmpi_and_slurm(void **state)
{
    (void)state;
    tfx_launch_env e;
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    assert_int_equal(tfx_launch_env_read(&e, NULL), 0);
    assert_string_equal(e.source, "OMPI");
    assert_int_equal(e.rank, 1);
    assert_int_equal(e.local_rank, -1);
    clear_env(NULL);
    setenv("SLURM_PROCID", "5", 1);
    setenv("SLURM_NTASKS", "8", 1);
    setenv("SLURM_LOCALID", "1", 1);
    assert_int_equal(tfx_launch_env_read(&e, NULL), 0);
    assert_string_equal(e.source, "SLURM");
    assert_int_equal(e.rank, 5);
    assert_int_equal(e.world_size, 8);
    assert_int_equal(e.local_rank, 1);
}

static void test_bad_values(void **state)
{
    (void)state;
    tfx_launch_env e;
    tf_error err = {0};
    setenv("RANK", "two", 1);
    setenv("WORLD_SIZE", "4", 1);
    assert_int_equal(tfx_launch_env_read(&e, &err), TF_EINVAL);
    assert_contains(err.msg, "RANK=\"two\"");
    setenv("RANK", "4", 1);
    assert_int_equal(tfx_launch_env_read(&e, &err), TF_EINVAL);
    assert_contains(err.msg, "is not below WORLD_SIZE=4");
    unsetenv("WORLD_SIZE");
    setenv("RANK", "0", 1);
    assert_int_equal(tfx_launch_env_read(&e, &err), TF_EINVAL);
    assert_contains(err.msg, "WORLD_SIZE is not");
}

/* Several processes but no rank: an error, not a lone run that exits 0.
 * A size of 1 without a rank is one process, as without any variable. */
static void test_size_without_rank(void **state)
{
    (void)state;
    tfx_launch_env e;
    tf_error err = {0};
    setenv("WORLD_SIZE", "2", 1);
    assert_int_equal(tfx_launch_env_read(&e, &err), TF_EINVAL);
    assert_contains(err.msg, "WORLD_SIZE=2 is set but RANK is not");
    unsetenv("WORLD_SIZE");
    setenv("SLURM_NTASKS", "4", 1);
    assert_int_equal(tfx_launch_env_read(&e, &err), TF_EINVAL);
    assert_contains(err.msg, "SLURM_NTASKS=4 is set but SLURM_PROCID is not");
    setenv("SLURM_NTASKS", "1", 1);
    assert_int_equal(tfx_launch_env_read(&e, &err), 0);
    assert_int_equal(e.launched, 0);
    assert_int_equal(e.world_size, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_not_launched, clear_env),
        cmocka_unit_test_setup(test_torchrun, clear_env),
        cmocka_unit_test_setup(test_openmpi_and_slurm, clear_env),
        cmocka_unit_test_setup(test_bad_values, clear_env),
        cmocka_unit_test_setup(test_size_without_rank, clear_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
