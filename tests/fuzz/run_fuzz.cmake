# Runs a fuzzer (fuzz_sframe, fuzz_eh_frame) for SECONDS from the seeds in
# SEEDS; fails on a crash.
#   cmake -DFUZZER=... -DSEEDS=... -DWORK=... -DSECONDS=60 -P run_fuzz.cmake
get_filename_component(name ${FUZZER} NAME)
file(REMOVE_RECURSE ${WORK}/corpus)
file(MAKE_DIRECTORY ${WORK}/corpus ${WORK}/artifacts)
execute_process(
  COMMAND ${FUZZER} -max_total_time=${SECONDS} -timeout=10
          -rss_limit_mb=2048 -print_final_stats=1
          -artifact_prefix=${WORK}/artifacts/
          ${WORK}/corpus ${SEEDS}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${name} failed (exit ${rc}); inputs in "
                      "${WORK}/artifacts")
endif()
message(STATUS "${name}: ${SECONDS} s without a finding")
