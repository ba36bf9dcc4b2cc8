//===- NcclAbiTest.cpp - Our NCCL declarations against nccl.h -------------===//
//
// Part of mtc. runtime/dist/NcclApi.h declares the part of NCCL's C ABI mtc
// calls without including nccl.h (no build depends on NCCL). Where CMake
// finds the toolkit's nccl.h (MTC_NCCL_H), this file compiles our values and
// sizes against it: a difference is a compile error. The loader is checked
// against the real libnccl.so.2 where one is installed (skipped, saying so,
// where not): ncclGetVersion through our table.
//
//===----------------------------------------------------------------------===//

#include "runtime/dist/NcclApi.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <type_traits>

#ifdef MTC_NCCL_H
#include MTC_NCCL_H

using namespace mtc::dist;

static_assert(sizeof(NcclUniqueId) == sizeof(ncclUniqueId));
static_assert(sizeof(NcclUniqueId) == NCCL_UNIQUE_ID_BYTES);
static_assert(alignof(NcclUniqueId) == alignof(ncclUniqueId));
static_assert(sizeof(NcclComm) == sizeof(ncclComm_t));
static_assert(sizeof(NcclStream) == sizeof(cudaStream_t));
// The enums travel as int through our table.
static_assert(sizeof(ncclResult_t) == sizeof(int));
static_assert(sizeof(ncclDataType_t) == sizeof(int));
static_assert(sizeof(ncclRedOp_t) == sizeof(int));
static_assert(int(kNcclSuccess) == int(ncclSuccess));
static_assert(int(kNcclUnhandledCudaError) == int(ncclUnhandledCudaError));
static_assert(int(kNcclSystemError) == int(ncclSystemError));
static_assert(int(kNcclInternalError) == int(ncclInternalError));
static_assert(int(kNcclInvalidArgument) == int(ncclInvalidArgument));
static_assert(int(kNcclInvalidUsage) == int(ncclInvalidUsage));
static_assert(int(kNcclRemoteError) == int(ncclRemoteError));
static_assert(int(kNcclInProgress) == int(ncclInProgress));
static_assert(int(kNcclFloat32) == int(ncclFloat32));
static_assert(int(kNcclFloat64) == int(ncclFloat64));
static_assert(int(kNcclBfloat16) == int(ncclBfloat16));
static_assert(int(kNcclSum) == int(ncclSum));
static_assert(int(kNcclMax) == int(ncclMax));

/// Each entry of our table has nccl.h's arity, and its parameters the same
/// sizes in the same order (enums as int, handles as pointers).
template <typename A, typename B> struct SameShape : std::false_type {};
template <typename RA, typename RB, typename... PA, typename... PB>
struct SameShape<RA (*)(PA...), RB (*)(PB...)> {
  static constexpr bool value = sizeof...(PA) == sizeof...(PB) &&
                                sizeof(RA) == sizeof(RB) &&
                                ((sizeof(PA) == sizeof(PB)) && ...);
};
#define MTC_SAME_SHAPE(name)                                                   \
  static_assert(SameShape<decltype(NcclApi::name), decltype(&::name)>::value,  \
                #name " differs from nccl.h")
MTC_SAME_SHAPE(ncclGetVersion);
MTC_SAME_SHAPE(ncclGetUniqueId);
MTC_SAME_SHAPE(ncclCommInitRank);
MTC_SAME_SHAPE(ncclCommDestroy);
MTC_SAME_SHAPE(ncclCommAbort);
MTC_SAME_SHAPE(ncclAllReduce);
MTC_SAME_SHAPE(ncclReduceScatter);
MTC_SAME_SHAPE(ncclAllGather);
MTC_SAME_SHAPE(ncclGroupStart);
MTC_SAME_SHAPE(ncclGroupEnd);
MTC_SAME_SHAPE(ncclGetErrorString);
MTC_SAME_SHAPE(ncclCommGetAsyncError);
#undef MTC_SAME_SHAPE
#endif

namespace {

TEST(NcclAbiTest, DeclarationsMatchTheToolkitHeader) {
#ifdef MTC_NCCL_H
  SUCCEED() << "checked at compile time against " << MTC_NCCL_H;
#else
  GTEST_SKIP() << "no nccl.h found by CMake: NcclApi.h's values were not "
                  "compared with NCCL's";
#endif
}

TEST(NcclAbiTest, VersionText) {
  EXPECT_EQ(mtc::dist::ncclVersionText(22809), "2.28.9");
  EXPECT_EQ(mtc::dist::ncclVersionText(2708), "2.7.8");
}

TEST(NcclAbiTest, MissingLibraryIsAClearError) {
  mtc::Expected<std::shared_ptr<const mtc::dist::NcclApi>> api =
      mtc::dist::openNccl("/nonexistent/libnccl.so.2");
  ASSERT_FALSE(api);
  EXPECT_NE(api.message().find("NCCL not found: /nonexistent/libnccl.so.2 "
                               "could not be opened"),
            std::string::npos)
      << api.message();
  // A library that is not NCCL: the first entry point it lacks is named.
  api = mtc::dist::openNccl("libc.so.6");
  ASSERT_FALSE(api);
  EXPECT_NE(api.message().find("has no ncclGetVersion"), std::string::npos)
      << api.message();
  ::setenv("MTC_NCCL_LIBRARY", "/opt/x/libnccl.so", 1);
  EXPECT_EQ(mtc::dist::ncclLibraryName(), "/opt/x/libnccl.so");
  ::unsetenv("MTC_NCCL_LIBRARY");
  EXPECT_EQ(mtc::dist::ncclLibraryName(), "libnccl.so.2");
}

TEST(NcclAbiTest, RealLibraryReportsItsVersion) {
  mtc::Expected<std::shared_ptr<const mtc::dist::NcclApi>> api =
      mtc::dist::loadNccl();
  if (!api)
    GTEST_SKIP() << "libnccl.so.2 not loadable here, real NCCL untested: "
                 << api.message();
  int version = 0;
  ASSERT_EQ((*api)->ncclGetVersion(&version), mtc::dist::kNcclSuccess);
  EXPECT_GE(version, 20400);
  const std::string text = mtc::dist::ncclVersionText(version);
  std::printf("[ INFO     ] NCCL %s at %s\n", text.c_str(),
              (*api)->where.c_str());
#ifdef MTC_NCCL_H
  // The library the header belongs to, when the toolkit brought both.
  if (text.rfind(std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) +
                     ".",
                 0) != 0)
    std::printf("[ INFO     ] (nccl.h is %d.%d.%d)\n", NCCL_MAJOR, NCCL_MINOR,
                NCCL_PATCH);
#endif
  EXPECT_NE(mtc::dist::ncclErrorText(**api, mtc::dist::kNcclInvalidUsage)
                .find("ncclInvalidUsage (5)"),
            std::string::npos);
}

} // namespace
