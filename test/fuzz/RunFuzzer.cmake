# Runs a libFuzzer target for SECONDS seconds on a fresh copy of its seed
# corpus. Fails if the fuzzer finds a crash, a leak or a timeout.
#
#   FUZZER      the fuzzer executable
#   SEEDS       the seed directory
#   SEEDS_GLOB  which files under SEEDS are seeds, relative to it (default "*";
#               may reach into subdirectories: "*/config.json"); each is copied
#               into the corpus under its relative path with '/' turned to '_'
#   EXTRA_SEEDS optional: a directory whose every file is a seed too (copied
#               as extra_<name>): hand-written inputs beside SEEDS
#   DICT        a libFuzzer dictionary, or empty for none
#   WORK        the corpus directory (removed and recreated)
#   ARTIFACTS   prefix of crash/leak/timeout inputs (default WORK/../)
#   SECONDS     how long to fuzz
#   MAX_LEN     the largest input libFuzzer generates (default 4096; seeds
#               longer than this are truncated, so keep it above them)
if(NOT SEEDS_GLOB)
  set(SEEDS_GLOB "*")
endif()
if(NOT MAX_LEN)
  set(MAX_LEN 4096)
endif()
if(NOT ARTIFACTS)
  set(ARTIFACTS ${WORK}/../)
endif()
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
file(GLOB seeds RELATIVE ${SEEDS} ${SEEDS}/${SEEDS_GLOB})
list(LENGTH seeds nseeds)
if(nseeds EQUAL 0)
  message(FATAL_ERROR "no seeds match ${SEEDS}/${SEEDS_GLOB}")
endif()
foreach(seed IN LISTS seeds)
  string(REPLACE "/" "_" flat ${seed})
  configure_file(${SEEDS}/${seed} ${WORK}/${flat} COPYONLY)
endforeach()
if(EXTRA_SEEDS)
  file(GLOB extra RELATIVE ${EXTRA_SEEDS} ${EXTRA_SEEDS}/*)
  list(LENGTH extra nextra)
  if(nextra EQUAL 0)
    message(FATAL_ERROR "no seeds in ${EXTRA_SEEDS}")
  endif()
  foreach(seed IN LISTS extra)
    configure_file(${EXTRA_SEEDS}/${seed} ${WORK}/extra_${seed} COPYONLY)
  endforeach()
endif()
set(dict_arg)
if(DICT)
  set(dict_arg -dict=${DICT})
endif()
execute_process(
  COMMAND ${FUZZER} -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048
          -max_len=${MAX_LEN} ${dict_arg} -print_final_stats=1
          -artifact_prefix=${ARTIFACTS} ${WORK}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${FUZZER} failed (exit ${rc}); see the crash input above")
endif()
