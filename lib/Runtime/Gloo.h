//===- Gloo.h - The cpu backend's Gloo communicator -------------*- C++ -*-===//
//
// Internal to libCleaveRuntime. Per PLATFORM.md, only gloo/transport/tcp/
// device.h is included from the transport (Debian's package lacks
// gloo/common/memory.h, which the other tcp headers need).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_RUNTIME_GLOO_H
#define CLEAVE_LIB_RUNTIME_GLOO_H

#include "Backend.h"
#include "Error.h"

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <memory>
#include <string>

namespace cleave::rt {

/// Reduce-scatter algorithms (CLEAVE_REDUCE_SCATTER selects one). Auto:
/// halving up to CLEAVE_RS_HALVING_BYTES in all, ring above.
enum class ReduceScatterAlgo { Auto, Ring, Direct, Halving, AllReduce };

/// Parses "auto", "ring", "direct", "halving", "allreduce"; throws
/// RuntimeError otherwise.
ReduceScatterAlgo parseReduceScatterAlgo(const std::string &name);

/// Gloo slots of the runtime's own transfers: the top byte is outside the
/// prefixes Gloo's collectives use (0x01..0x08).
constexpr uint64_t kSendRecvSlot = 0x43ull << 56;
constexpr uint64_t kReduceScatterSlot = 0x41ull << 56;
constexpr uint64_t kDirectAllReduceSlot = 0x42ull << 56;
constexpr uint64_t kDirectAllGatherSlot = 0x44ull << 56;

/// Converts a Gloo exception into a CommError (timeout or peer failure).
[[noreturn]] void rethrowGloo(const std::exception &e);

/// Runs `fn`, converting Gloo's exceptions into CommError.
template <typename Fn>
void glooCall(Fn &&fn) {
  try {
    fn();
  } catch (const CommError &) {
    throw;
  } catch (const RuntimeError &) {
    throw;
  } catch (const std::exception &e) {
    rethrowGloo(e);
  }
}

/// Waits for `n` receives (or sends) on `buffer`; throws CommError on a
/// timeout or abort.
void waitRecvs(gloo::transport::UnboundBuffer &buffer, int n,
               std::chrono::milliseconds timeout);
void waitSends(gloo::transport::UnboundBuffer &buffer, int n,
               std::chrono::milliseconds timeout);

/// Wakes every wait of waitRecvs/waitSends in progress, and makes later
/// ones fail at once, until resetPendingWaits() (a new backend).
void abortPendingWaits();
void resetPendingWaits();

/// The reduce-scatter algorithms over a connected Gloo context.
void ringReduceScatter(const std::shared_ptr<gloo::Context> &ctx,
                       const void *in, void *out, size_t count, int32_t dtype,
                       int32_t op, uint32_t tag,
                       std::chrono::milliseconds timeout, size_t segmentBytes,
                       char *scratch /* 4 * count elements */);
void directReduceScatter(const std::shared_ptr<gloo::Context> &ctx,
                         const void *in, void *out, size_t count, int32_t dtype,
                         int32_t op, uint32_t tag,
                         std::chrono::milliseconds timeout,
                         char *scratch /* group size * count elements */);

void halvingReduceScatter(const std::shared_ptr<gloo::Context> &ctx,
                          const void *in, void *out, size_t count,
                          int32_t dtype, int32_t op, uint32_t tag,
                          std::chrono::milliseconds timeout,
                          char *scratch /* 2 * group size * count elements */);

/// One-round all-reduce (every rank sends its buffer to every other and
/// sums all of them in rank order) and all-gather (every rank sends its
/// block to every other); GlooDirect.cpp.
void directAllReduce(const std::shared_ptr<gloo::Context> &ctx, const void *in,
                     void *out, size_t count, int32_t dtype, int32_t op,
                     uint32_t tag, std::chrono::milliseconds timeout,
                     char *scratch /* group size * count elements */);
void directAllGather(const std::shared_ptr<gloo::Context> &ctx, const void *in,
                     void *out, size_t bytes, uint32_t tag,
                     std::chrono::milliseconds timeout);

} // namespace cleave::rt

#endif // CLEAVE_LIB_RUNTIME_GLOO_H
