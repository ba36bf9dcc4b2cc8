# Runs the parser fuzzer for SECONDS seconds on a fresh copy of the seed corpus
# (the examples). Fails if the fuzzer finds a crash, a leak or a timeout.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
file(GLOB seeds ${SEEDS}/*.mt)
file(COPY ${seeds} DESTINATION ${WORK})
execute_process(
  COMMAND ${FUZZER} -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048
          -max_len=4096 -dict=${DICT} -print_final_stats=1
          -artifact_prefix=${WORK}/../ ${WORK}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "parser fuzzer failed (exit ${rc}); see the crash input above")
endif()
