// The in-process communicator: every collective against a host-computed expectation with fresh random
// bytes per check and poisoned receive buffers (uneven and zero-byte chunks included), the collective-
// mismatch and size-mismatch errors, a rank that fails (error Status, exception) or hangs failing every
// rank with a message naming it, and the rendezvous file (atomic publish, refusal of a stale file,
// timeout).
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <thread>

#include "dist/communicator.h"
#include "dist/in_process.h"
#include "dist/rendezvous.h"

namespace vortex {
namespace {

uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

// The byte a rank `from` sends to rank `to` at position i (seeded per test run).
uint8_t pattern(uint64_t seed, int from, int to, size_t i) {
  uint64_t x = seed ^ (static_cast<uint64_t>(from) << 40) ^ (static_cast<uint64_t>(to) << 20) ^ i;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return static_cast<uint8_t>(x);
}

// Chunk bytes from rank i to rank j: uneven, some zero.
size_t chunk_bytes(int from, int to) { return static_cast<size_t>((from * 7 + to * 3) % 5) * 37; }

CommOptions quick(int ms) {
  CommOptions o;
  o.timeout = std::chrono::milliseconds(ms);
  return o;
}

TEST(Split, EvenSplitCoversTheRangeWithSizesDifferingByAtMostOne) {
  for (int64_t total : {1, 4, 7, 56, 37810})
    for (int size : {1, 2, 3, 4, 7, 8, 16}) {
      if (size > total) continue;
      int64_t expect = 0, lo = total, hi = 0;
      for (int r = 0; r < size; ++r) {
        Span s = even_split(total, size, r);
        ASSERT_EQ(s.begin, expect);
        expect = s.end;
        lo = std::min(lo, s.size());
        hi = std::max(hi, s.size());
      }
      EXPECT_EQ(expect, total);
      EXPECT_LE(hi - lo, 1) << total << " over " << size;
    }
}

TEST(InProcess, AllToAllDeliversEveryChunkConcurrently) {
  const uint64_t seed = fresh_seed();
  for (int u : {1, 2, 3, 7}) {
    Status st = run_in_process_ranks(u, quick(20000), [&](Communicator& c) -> Status {
      const int me = c.rank();
      std::vector<Tensor> send, recv;
      for (int j = 0; j < u; ++j) {
        Tensor s = Tensor::empty({static_cast<int64_t>(chunk_bytes(me, j))}, DType::kU8);
        for (size_t i = 0; i < s.nbytes(); ++i) s.data<uint8_t>()[i] = pattern(seed, me, j, i);
        send.push_back(s);
        Tensor r = Tensor::empty({static_cast<int64_t>(chunk_bytes(j, me))}, DType::kU8);
        if (r.nbytes()) std::memset(r.raw_data(), 0xFF, r.nbytes());
        recv.push_back(r);
      }
      for (int round = 0; round < 3; ++round) VORTEX_RETURN_IF_ERROR(c.all_to_all(send, recv));
      for (int j = 0; j < u; ++j)
        for (size_t i = 0; i < recv[j].nbytes(); ++i)
          if (recv[j].data<uint8_t>()[i] != pattern(seed, j, me, i))
            return internal_error("rank " + std::to_string(me) + ": byte " + std::to_string(i) + " from rank " +
                                  std::to_string(j) + " is wrong");
      return Status::Ok();
    });
    EXPECT_TRUE(st.ok()) << "U=" << u << " seed=" << seed << ": " << st.to_string();
  }
}

TEST(InProcess, AllGatherBroadcastAndBarrier) {
  const uint64_t seed = fresh_seed();
  const int u = 4;
  Status st = run_in_process_ranks(u, quick(20000), [&](Communicator& c) -> Status {
    const int me = c.rank();
    Tensor mine = Tensor::empty({static_cast<int64_t>(10 + me)}, DType::kU8);  // uneven sizes
    for (size_t i = 0; i < mine.nbytes(); ++i) mine.data<uint8_t>()[i] = pattern(seed, me, 0, i);
    std::vector<Tensor> all;
    for (int j = 0; j < u; ++j) {
      Tensor t = Tensor::empty({static_cast<int64_t>(10 + j)}, DType::kU8);
      std::memset(t.raw_data(), 0xFF, t.nbytes());
      all.push_back(t);
    }
    VORTEX_RETURN_IF_ERROR(c.all_gather(mine, all));
    for (int j = 0; j < u; ++j)
      for (size_t i = 0; i < all[j].nbytes(); ++i)
        if (all[j].data<uint8_t>()[i] != pattern(seed, j, 0, i)) return internal_error("all_gather: wrong byte");
    Tensor b = Tensor::empty({64}, DType::kU8);
    for (size_t i = 0; i < 64; ++i) b.data<uint8_t>()[i] = pattern(seed, me, 9, i);
    VORTEX_RETURN_IF_ERROR(c.broadcast(b, 2));
    for (size_t i = 0; i < 64; ++i)
      if (b.data<uint8_t>()[i] != pattern(seed, 2, 9, i)) return internal_error("broadcast: wrong byte");
    return c.barrier();
  });
  EXPECT_TRUE(st.ok()) << "seed=" << seed << ": " << st.to_string();
}

TEST(InProcess, MismatchedCollectivesAndSizesAreErrorsNotHangs) {
  Status st = run_in_process_ranks(2, quick(20000), [&](Communicator& c) -> Status {
    if (c.rank() == 0) return c.barrier();
    Tensor t = Tensor::empty({4}, DType::kU8);
    return c.broadcast(t, 1);
  });
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("collective mismatch"), std::string::npos) << st.message();

  st = run_in_process_ranks(2, quick(20000), [&](Communicator& c) -> Status {
    std::vector<Tensor> send{Tensor::empty({4}, DType::kU8), Tensor::empty({4}, DType::kU8)};
    std::vector<Tensor> recv{Tensor::empty({4}, DType::kU8), Tensor::empty({c.rank() == 0 ? 5 : 4}, DType::kU8)};
    return c.all_to_all(send, recv);
  });
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("sends 4 bytes to rank 0, which expects 5"), std::string::npos) << st.message();
}

TEST(InProcess, ARankThatFailsOrThrowsFailsEveryRankWithItsReason) {
  for (bool throw_it : {false, true}) {
    std::atomic<int> peers_failed{0};
    Status st = run_in_process_ranks(4, quick(60000), [&](Communicator& c) -> Status {
      for (int step = 0; step < 5; ++step) {
        if (c.rank() == 2 && step == 3) {
          if (throw_it) throw std::runtime_error("injected fault in rank 2");
          return internal_error("injected fault in rank 2");
        }
        Status b = c.barrier();
        if (!b.ok()) {
          ++peers_failed;
          return b;
        }
      }
      return Status::Ok();
    });
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("rank 2 failed"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("injected fault in rank 2"), std::string::npos) << st.message();
    if (throw_it) {
      EXPECT_NE(st.message().find("exception"), std::string::npos) << st.message();
    }
    EXPECT_EQ(peers_failed.load(), 3) << "every peer must see the failure, none may hang";
  }
}

TEST(InProcess, AHungRankTimesOutOnEveryPeerNamingIt) {
  InProcessWorld world(3, quick(300));
  std::vector<Status> results(3);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      auto c = world.communicator(r);
      if (r == 1) {  // hangs: never calls the collective; wakes only once the world has failed
        while (world.failure().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        return;
      }
      results[r] = c->barrier();
    });
  for (auto& t : threads) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int r : {0, 2}) {
    ASSERT_FALSE(results[r].ok());
    EXPECT_NE(results[r].message().find("rank(s) 1 did not reach barrier #0"), std::string::npos)
        << results[r].message();
  }
  EXPECT_LT(s, 10.0) << "the timeout is 0.3 s";
}

TEST(Rendezvous, PublishesAtomicallyRefusesStaleFilesAndTimesOut) {
  const std::string dir = std::filesystem::temp_directory_path() /
                          ("vortex_rdv_" + std::to_string(::getpid()) + "_" + std::to_string(fresh_seed() % 100000));
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/id";
  std::string bytes(128, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(pattern(fresh_seed(), 0, 0, i));
  std::thread reader_thread;
  Result<std::string> got = std::string();
  reader_thread = std::thread([&] { got = await_rendezvous(path, 128, std::chrono::milliseconds(20000)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(publish_rendezvous(path, bytes).ok());
  reader_thread.join();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, bytes);
  Status again = publish_rendezvous(path, bytes);
  EXPECT_FALSE(again.ok());
  EXPECT_NE(again.message().find("already exists"), std::string::npos);
  auto late = await_rendezvous(dir + "/never", 128, std::chrono::milliseconds(100));
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.status().message().find("did not publish"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vortex
