/* An unrelated preloaded library: linger-run must keep it in LD_PRELOAD when
 * it removes itself (exec.c checks, through exec_helper, that children still
 * have it). It does nothing. */
int linger_run_test_marker = 1;
