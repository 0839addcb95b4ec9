# unwind_vmbench: SFrame against frame pointers, per frame, in the VM.
# The chain is built twice from one source; see bench_chain.c.
add_library(bench_chain_sframe OBJECT bench_chain.c)
target_compile_definitions(bench_chain_sframe PRIVATE CHAIN_PREFIX=sframe_)
target_compile_options(bench_chain_sframe PRIVATE -O2 -fomit-frame-pointer -Wa,--gsframe)
add_library(bench_chain_fp OBJECT bench_chain.c)
target_compile_definitions(bench_chain_fp PRIVATE CHAIN_PREFIX=fp_)
target_compile_options(bench_chain_fp PRIVATE -O2 -fno-omit-frame-pointer)

add_executable(unwind_vmbench unwind_vmbench.cc
  $<TARGET_OBJECTS:bench_chain_sframe> $<TARGET_OBJECTS:bench_chain_fp>)
# The harness frames carry both .sframe and frame pointers (like
# libsframe-client), so both methods step through them.
target_compile_options(unwind_vmbench PRIVATE -O2 -Wall -Wextra -Wa,--gsframe -fno-omit-frame-pointer)
target_link_libraries(unwind_vmbench PRIVATE sframe-gen sframe-profile sframe-client-static)

# profile_vmbench: the cost of profiling through a session (and, when perf is
# installed, of perf record --call-graph fp/dwarf) to the profiled workload,
# session_workload from tests/vm.
if(TARGET session_workload)
  add_executable(profile_vmbench profile_vmbench.cc)
  target_compile_options(profile_vmbench PRIVATE -O2 -Wall -Wextra)
  target_link_libraries(profile_vmbench PRIVATE sframe-gen sframe-profile sframe-client-static)
  target_compile_definitions(profile_vmbench PRIVATE
    SFRAME_BENCH_WORKLOAD="$<TARGET_FILE:session_workload>"
    SFRAME_BENCH_WORKLOAD_FP="$<TARGET_FILE:session_workload_fpbuild>"
    SFRAME_BENCH_PROF="$<TARGET_FILE:sframe-prof>"
    SFRAME_BENCH_DEMO="$<TARGET_FILE:demo_workload>")
  set_target_properties(profile_vmbench PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
  add_dependencies(profile_vmbench session_workload session_workload_fpbuild sframe-prof
    demo_workload)
endif()

# discovery_vmbench: first-unwind latency and steady state of a process
# covered by discovery, against one that registers its objects.
add_executable(discovery_vmbench discovery_vmbench.cc $<TARGET_OBJECTS:bench_chain_sframe>)
target_compile_options(discovery_vmbench PRIVATE -O2 -Wall -Wextra -Wa,--gsframe -fomit-frame-pointer)
target_link_libraries(discovery_vmbench PRIVATE sframe-gen sframe-profile sframe-client-static)
set_target_properties(discovery_vmbench PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)

# bounds_vmbench: worst cases of the decoding bounds (issue 10, finding 1)
# next to the typical case: one UNWIND_SELF, one interrupt-context unwind.
add_executable(bounds_vmbench bounds_vmbench.cc $<TARGET_OBJECTS:bench_chain_sframe>)
target_include_directories(bounds_vmbench PRIVATE ${PROJECT_SOURCE_DIR}/tests/vm)
target_compile_options(bounds_vmbench PRIVATE -O2 -Wall -Wextra -Wa,--gsframe -fomit-frame-pointer)
target_link_libraries(bounds_vmbench PRIVATE sframe-gen sframe-profile sframe-client-static)
set_target_properties(bounds_vmbench PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)

# coverd_vmbench: the time from a new binary's exec to its coverage by
# sframe-coverd (the service must run in the guest).
add_executable(coverd_vmbench coverd_vmbench.cc)
target_compile_options(coverd_vmbench PRIVATE -O2 -Wall -Wextra)
target_link_libraries(coverd_vmbench PRIVATE sframe-gen sframe-client-static)
set_target_properties(coverd_vmbench PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
