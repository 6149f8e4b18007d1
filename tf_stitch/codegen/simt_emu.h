// tf_stitch/codegen/simt_emu.h
//
// SIMT emulation: the CUDA source that codegen/cuda.py generates, compiled as host C++ and run
// on the CPU, so that CI (which has no GPU) checks the exact kernels nvcc compiles.
//
// A launch runs its blocks one after another. The threads of a block are fibers (ucontext)
// on the calling thread, scheduled deterministically: each runs until it reaches a barrier
// (__syncthreads, or the exchange inside a warp shuffle) or returns, then the next one runs.
// So a missing barrier is not a rare race but a wrong value every time (thread 0 reads what
// thread 32 has not written yet), and a barrier not reached by every thread of the block is
// reported as an error. `__shared__` variables are function statics: one copy, used by the one
// block that runs at a time. Warp shuffles exchange values through the block (every thread of
// the block must call them together, as the generated reductions do).

#ifndef TF_STITCH_CODEGEN_SIMT_EMU_H_
#define TF_STITCH_CODEGEN_SIMT_EMU_H_

#include <ucontext.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#define TS_SIMT_EMULATION 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __shared__ static
#define __launch_bounds__(n)

struct ts_dim3 {
  unsigned x = 1, y = 1, z = 1;
};

namespace ts_emu {

struct Fiber {
  ucontext_t context;
  std::unique_ptr<char[]> stack;
  bool done = false;
};

struct Block {
  std::vector<Fiber> fibers;
  ucontext_t scheduler;
  Fiber* current = nullptr;
  unsigned arrived = 0;
  std::vector<uint64_t> exchange;  // one value's bits per thread, for warp shuffles (<= 8 bytes)
  std::function<void()> body;
};

inline ts_dim3 block_idx, thread_idx, block_dim, grid_dim;
inline Block* running = nullptr;

[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "tf_stitch SIMT emulation: %s\n", what);
  std::abort();
}

inline void fiber_entry() {
  running->body();
  running->current->done = true;
  swapcontext(&running->current->context, &running->scheduler);
  fail("a finished thread was resumed");
}

// Waits until every thread of the block has arrived here (a block-wide barrier).
inline void barrier() {
  Block& b = *running;
  ++b.arrived;
  swapcontext(&b.current->context, &b.scheduler);
}

inline constexpr std::size_t kStackBytes = 64 * 1024;

// Runs `body` as one block of `threads` threads.
inline void run_block(unsigned threads, const std::function<void()>& body) {
  Block b;
  b.fibers.resize(threads);
  b.exchange.assign(threads, 0);
  b.body = body;
  running = &b;
  for (Fiber& f : b.fibers) {
    f.stack.reset(new char[kStackBytes]);
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack.get();
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = nullptr;
    makecontext(&f.context, fiber_entry, 0);
  }
  for (;;) {
    b.arrived = 0;
    unsigned finished = 0;
    for (unsigned t = 0; t < threads; ++t) {
      Fiber& f = b.fibers[t];
      if (f.done) {
        ++finished;
        continue;
      }
      thread_idx.x = t;
      b.current = &f;
      swapcontext(&b.scheduler, &f.context);
      if (f.done) ++finished;
    }
    if (finished == threads) break;
    if (finished != 0) fail("__syncthreads() not reached by every thread of the block");
  }
  running = nullptr;
}

// Runs a grid of `blocks` blocks of `threads` threads; launches from several host threads
// take turns (the emulation's state is global).
inline void launch(unsigned blocks, unsigned threads, const std::function<void()>& body) {
  static std::mutex one_at_a_time;
  std::lock_guard<std::mutex> lock(one_at_a_time);
  if (threads == 0 || threads % 32 != 0) fail("blockDim.x must be a positive multiple of 32");
  grid_dim.x = blocks;
  block_dim.x = threads;
  for (unsigned g = 0; g < blocks; ++g) {
    block_idx.x = g;
    run_block(threads, body);
  }
}

}  // namespace ts_emu

#define blockIdx (::ts_emu::block_idx)
#define threadIdx (::ts_emu::thread_idx)
#define blockDim (::ts_emu::block_dim)
#define gridDim (::ts_emu::grid_dim)

inline void __syncthreads() { ts_emu::barrier(); }

// The value of thread (this thread ^ lane_mask) of the warp (a float's exact in a double).
template <typename T>
inline T __shfl_xor_sync(unsigned /*mask*/, T value, int lane_mask) {
  ts_emu::Block& b = *ts_emu::running;
  const unsigned t = threadIdx.x;
  const unsigned other = t ^ static_cast<unsigned>(lane_mask);
  static_assert(sizeof(T) <= sizeof(uint64_t), "a shuffled value fits 8 bytes");
  std::memcpy(&b.exchange[t], &value, sizeof(T));
  ts_emu::barrier();
  T result = value;
  if (other < blockDim.x) std::memcpy(&result, &b.exchange[other], sizeof(T));
  ts_emu::barrier();
  return result;
}

inline unsigned long long atomicCAS(unsigned long long* address, unsigned long long compare,
                                    unsigned long long value) {
  __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_ACQ_REL,
                              __ATOMIC_ACQUIRE);
  return compare;  // the old value, as CUDA's atomicCAS returns it
}

#endif  // TF_STITCH_CODEGEN_SIMT_EMU_H_
