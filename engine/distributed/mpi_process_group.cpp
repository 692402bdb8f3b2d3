#include "engine/distributed/mpi_process_group.h"

#include "engine/distributed/rank_failure.h"
#include "engine/distributed/wait_clock.h"

#include <mpi.h>

#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <list>
#include <mutex>
#include <sstream>
#include <thread>

namespace dprun {

namespace {

void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  fail("MPI ", what, " failed: ", std::string(text, static_cast<size_t>(length)));
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void initialize() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  std::atexit(finalize_at_exit);
  DPRUN_CHECK(provided >= MPI_THREAD_SERIALIZED, "the MPI library gives only thread level ",
              provided,
              "; dprun needs MPI_THREAD_SERIALIZED (all-reduces start on the threads that run the "
              "backward pass)");
}

/// The first of these environment variables that is set, or "?".
std::string first_env(std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (const char* value = std::getenv(name)) return value;
  return "?";
}

/// Bounds the start of the job. MPI_Init_thread and the first MPI_Comm_dup wait inside the
/// library until every rank has joined, where no timeout of ours reaches: a rank stopped or
/// stuck before it joins would hang the others forever. While a StartupWatch lives, a thread
/// ends this process (exit status 1) once the start has lasted longer than `timeout` seconds
/// of time the process ran. Open MPI does not say which ranks have joined before MPI_Init
/// returns, so the message gives the job's size only.
class StartupWatch {
 public:
  explicit StartupWatch(double timeout) : thread_([this, timeout] { watch(timeout); }) {}
  StartupWatch(const StartupWatch&) = delete;
  StartupWatch& operator=(const StartupWatch&) = delete;
  ~StartupWatch() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }

 private:
  void watch(double timeout) {
    WaitClock clock;
    std::unique_lock<std::mutex> lock(mutex_);
    while (!done_) {
      wake_.wait_for(lock, std::chrono::milliseconds(100));
      clock.tick();
      if (done_ || clock.waited <= timeout) continue;
      std::fprintf(stderr,
                   "dprun: error: rank %s: the job did not start within %g s: MPI_Init is still "
                   "waiting for some of the %s ranks to join (stopped or stuck before joining; "
                   "Open MPI does not say which)\n",
                   first_env({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}).c_str(), timeout,
                   first_env({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}).c_str());
      std::fflush(stderr);
      std::_Exit(1);
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;  // last: it starts once the members above exist
};

int as_count(int64_t n, const char* what) {
  DPRUN_CHECK(n >= 0 && n <= INT_MAX, what, ": ", n, " elements are more than one MPI call takes");
  return static_cast<int>(n);
}

/// The MPI type of a summed element: MPI has no 16-bit floats, so those travel as 16-bit
/// words and are summed by the group's own operation (sum_op).
MPI_Datatype mpi_type(DType dtype) {
  if (dtype == DType::Float32) return MPI_FLOAT;
  if (dtype == DType::Float64) return MPI_DOUBLE;
  if (dtype == DType::Float16 || dtype == DType::BFloat16) return MPI_UINT16_T;
  fail("all_reduce_sum: only float32, float64, float16 and bfloat16 tensors can be summed, not ",
       dtype_name(dtype));
}

/// An MPI reduction function: inout[i] = in[i] + inout[i] for 16-bit floats of type T,
/// computed in float and rounded once (add_in_place).
template <class T>
void sum_16bit(void* in, void* inout, int* len, MPI_Datatype*) {
  add_in_place(inout, in, *len, dtype_of<T>());
}

/// Between two tests of a request. MPI moves a large message on only inside MPI calls, one
/// piece per test, so the tests follow each other closely, yielding the core to any other
/// thread that wants it. A wait that has lasted 10 s is waiting for a rank that is behind, not
/// for data: it tests every millisecond from then on.
void pause_after(double waited) {
  if (waited < 10)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// The two channels of ProcessGroup's matching rules.
enum Channel { kControl = 0, kReduce = 1 };

// Point-to-point tags on the probe communicator: a rank whose wait timed out asks every other
// rank how far it got (kQueryTag), and each answers with how many collectives of each channel
// it has started (kReplyTag).
constexpr int kQueryTag = 1, kReplyTag = 2;

bool test_request(MPI_Request& request, const char* what) {
  if (request == MPI_REQUEST_NULL) return true;
  int done = 0;
  check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
  return done != 0;
}

// One all-reduce in flight.
struct ReduceState {
  Tensor tensor;
  ReduceOrder order = ReduceOrder::Any;
  int64_t seq = 0;                         // which all-reduce of the group this is, counted from 1
  MPI_Request request = MPI_REQUEST_NULL;  // Any: the all-reduce; RankOrder: phase 2
  // RankOrder: phase 1 (the slices to their owners), then the owner's sum, then phase 2.
  MPI_Request scatter = MPI_REQUEST_NULL;
  bool phase2_started = false;
  // Per rank, in elements: the slices (sent in phase 1, gathered in phase 2), and where every
  // rank's copy of this rank's slice lands. MPI reads them until the requests complete.
  std::vector<int> counts, displs, recv_counts, recv_displs;
  std::vector<uint8_t> received;  // every rank's copy of this rank's slice, in rank order
};

class MpiGroup : public ProcessGroup {
 public:
  explicit MpiGroup(ProcessGroupOptions options) : options_(options) {
    StartupWatch watch(options.timeout_seconds);
    initialize();
    for (MPI_Comm* comm : {&reduce_, &gather_back_, &control_, &probe_}) {
      check(MPI_Comm_dup(MPI_COMM_WORLD, comm), "MPI_Comm_dup");
      MPI_Comm_set_errhandler(*comm, MPI_ERRORS_RETURN);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    check(MPI_Op_create(&sum_16bit<Float16>, 1, &sum_float16_), "MPI_Op_create");
    check(MPI_Op_create(&sum_16bit<BFloat16>, 1, &sum_bfloat16_), "MPI_Op_create");
  }

  ~MpiGroup() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    for (MPI_Comm* comm : {&reduce_, &gather_back_, &control_, &probe_}) MPI_Comm_free(comm);
    for (MPI_Op* op : {&sum_float16_, &sum_bfloat16_}) MPI_Op_free(op);
  }

  /// The reduction that sums elements of `dtype`.
  MPI_Op sum_op(DType dtype) const {
    if (dtype == DType::Float16) return sum_float16_;
    if (dtype == DType::BFloat16) return sum_bfloat16_;
    return MPI_SUM;
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  std::unique_ptr<CollectiveWork> all_reduce_sum(Tensor tensor, ReduceOrder order) override;

  /// Starts phase 2 of rank-order reductions whose phase 1 finished, strictly in the order they
  /// were started, so every rank issues the phase-2 all-gathers in the same order.
  void advance() {
    while (!pending_.empty()) {
      ReduceState& s = *pending_.front();
      if (!test_request(s.scatter, "MPI_Ialltoallv")) return;
      start_phase2(s);
      pending_.pop_front();
    }
  }

  void set_stage(const std::string& stage) override { stage_ = stage; }

  /// Waits until `done()` is true. While it waits longer than a moment, answers other ranks'
  /// questions (serve_queries); past the timeout, finds which ranks have not started collective
  /// `seq` of `channel` and throws naming them.
  template <class Done>
  void wait_for(Done done, Channel channel, int64_t seq, const char* kind) {
    WaitClock clock;
    while (!done()) {
      clock.tick();
      if (clock.waited > kServeAfter) serve_queries();
      if (clock.waited > options_.timeout_seconds) {
        if (late_ranks_answered(done, channel, seq, kind, clock)) return;
      }
      pause_after(clock.waited);
    }
  }

  void broadcast(Tensor tensor, int root) override {
    check_root(root, "broadcast");
    DPRUN_CHECK(tensor.device().type == DeviceType::CPU,
                "broadcast: the tensor must be in host memory, not ", tensor.describe());
    const int64_t seq = ++entered_[kControl];
    auto* data = static_cast<uint8_t*>(tensor.raw_data());
    size_t total = tensor.nbytes();
    constexpr size_t kPiece = size_t(1) << 30;
    for (size_t off = 0; off < total || off == 0; off += kPiece) {
      int n = static_cast<int>(std::min(kPiece, total - off));
      MPI_Request request;
      check(MPI_Ibcast(data + off, n, MPI_BYTE, root, control_, &request), "MPI_Ibcast");
      wait(request, seq, "broadcast");
      if (total == 0) break;
    }
  }

  std::vector<uint8_t> all_gather(std::span<const uint8_t> bytes) override {
    const int64_t seq = ++entered_[kControl];
    std::vector<uint8_t> out(bytes.size() * static_cast<size_t>(size_));
    int n = as_count(static_cast<int64_t>(bytes.size()), "all_gather");
    MPI_Request request;
    check(MPI_Iallgather(bytes.data(), n, MPI_BYTE, out.data(), n, MPI_BYTE, control_, &request),
          "MPI_Iallgather");
    wait(request, seq, "all-gather");
    return out;
  }

  std::vector<std::vector<uint8_t>> gather(std::span<const uint8_t> bytes, int root) override {
    check_root(root, "gather");
    const int64_t seq = ++entered_[kControl];
    int n = as_count(static_cast<int64_t>(bytes.size()), "gather");
    std::vector<int> counts(static_cast<size_t>(size_));
    MPI_Request request;
    check(MPI_Igather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, root, control_, &request),
          "MPI_Igather");
    wait(request, seq, "gather");
    std::vector<int> displs(counts.size());
    int64_t total = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
      displs[r] = as_count(total, "gather");
      total += counts[r];
    }
    std::vector<uint8_t> all(rank_ == root ? static_cast<size_t>(total) : 0);
    check(MPI_Igatherv(bytes.data(), n, MPI_BYTE, all.data(), counts.data(), displs.data(),
                       MPI_BYTE, root, control_, &request),
          "MPI_Igatherv");
    wait(request, seq, "gather");
    std::vector<std::vector<uint8_t>> out;
    if (rank_ != root) return out;
    for (size_t r = 0; r < counts.size(); ++r)
      out.emplace_back(all.begin() + displs[r], all.begin() + displs[r] + counts[r]);
    return out;
  }

  void barrier() override {
    const int64_t seq = ++entered_[kControl];
    MPI_Request request;
    check(MPI_Ibarrier(control_, &request), "MPI_Ibarrier");
    wait(request, seq, "barrier");
  }

  [[noreturn]] void abort(int exit_code) override {
    std::fflush(nullptr);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);
  }

 private:
  /// A wait answers other ranks' questions once it has lasted this long (seconds): in a job
  /// that moves, waits are shorter, and the questions need no answer.
  static constexpr double kServeAfter = 0.05;
  /// How long a rank whose wait timed out waits for the others' answers (seconds, at most the
  /// timeout): ranks that wait answer within milliseconds, and one that does not is the late one.
  static constexpr double kAnswerWithin = 2.0;

  // A reply on its way to a rank that asked.
  struct Reply {
    int64_t entered[2] = {0, 0};
    MPI_Request request = MPI_REQUEST_NULL;
  };

  void wait(MPI_Request& request, int64_t seq, const char* kind) {
    wait_for([&] { return test_request(request, kind); }, kControl, seq, kind);
  }

  /// Answers every question waiting on the probe communicator with how many collectives of each
  /// channel this rank has started.
  void serve_queries() {
    for (;;) {
      int pending = 0;
      MPI_Status status;
      check(MPI_Iprobe(MPI_ANY_SOURCE, kQueryTag, probe_, &pending, &status), "MPI_Iprobe");
      if (!pending) break;
      int64_t unused = 0;
      check(MPI_Recv(&unused, 1, MPI_INT64_T, status.MPI_SOURCE, kQueryTag, probe_,
                     MPI_STATUS_IGNORE),
            "MPI_Recv");
      Reply& reply = replies_.emplace_back();
      reply.entered[kControl] = entered_[kControl];
      reply.entered[kReduce] = entered_[kReduce];
      check(MPI_Isend(reply.entered, 2, MPI_INT64_T, status.MPI_SOURCE, kReplyTag, probe_,
                      &reply.request),
            "MPI_Isend");
    }
    replies_.remove_if([](Reply& r) { return test_request(r.request, "MPI_Isend"); });
  }

  /// After a wait timed out: asks every other rank how far it got, waits up to kAnswerWithin
  /// for the answers (still answering others and testing the collective), and throws naming the
  /// ranks that did not answer, or when every rank answered, those that have not started
  /// collective `seq` of `channel`. Returns true when the collective completed meanwhile (a rank
  /// was late, not absent).
  template <class Done>
  bool late_ranks_answered(Done done, Channel channel, int64_t seq, const char* kind,
                           WaitClock& clock) {
    const auto n = static_cast<size_t>(size_);
    // MPI may still use them after this returns (a rank that never answers): the group keeps
    // them.
    std::vector<int64_t>& query = question_buffers_.emplace_back(n, 0);
    std::vector<int64_t>& answers = question_buffers_.emplace_back(2 * n, -1);
    std::vector<MPI_Request> requests;  // the questions, then the answers
    std::vector<int> asked;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      asked.push_back(r);
      MPI_Request& q = requests.emplace_back();
      check(MPI_Isend(&query[static_cast<size_t>(r)], 1, MPI_INT64_T, r, kQueryTag, probe_, &q),
            "MPI_Isend");
    }
    const size_t first_answer = requests.size();
    for (int r : asked) {
      MPI_Request& a = requests.emplace_back();
      check(
          MPI_Irecv(&answers[2 * static_cast<size_t>(r)], 2, MPI_INT64_T, r, kReplyTag, probe_, &a),
          "MPI_Irecv");
    }
    const double limit = std::min(kAnswerWithin, options_.timeout_seconds);
    WaitClock answering;
    bool all_answered = false;
    while (!all_answered && answering.waited < limit) {
      if (done()) return true;
      serve_queries();
      all_answered = true;
      for (size_t i = first_answer; i < requests.size(); ++i)
        all_answered = test_request(requests[i], "MPI_Irecv") && all_answered;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      answering.tick();
    }
    if (done()) return true;
    clock.stopped += answering.stopped;
    // A rank that did not answer is not in any wait (stopped, stuck, or computing for longer
    // than the timeout): it is the one to name. A rank that answered without having started
    // this collective is waiting in an earlier one, usually for the silent rank, so it is
    // named only when no rank was silent.
    std::vector<int> silent, behind;
    for (int r : asked) {
      const int64_t started = answers[2 * static_cast<size_t>(r) + channel];
      if (answers[2 * static_cast<size_t>(r)] < 0)
        silent.push_back(r);
      else if (started < seq)
        behind.push_back(r);
    }
    fail(timeout_message(silent.empty() ? behind : silent, kind, clock));
  }

  std::string timeout_message(const std::vector<int>& late, const char* kind,
                              const WaitClock& clock) const {
    std::ostringstream out;
    const std::string where = std::string(kind) + (stage_.empty() ? "" : " " + stage_);
    if (late.empty())
      out << "the " << where << " did not complete within " << options_.timeout_seconds
          << " s, though every rank joined it";
    else
      out << ranks_text(late) << " did not join the " << where << " within "
          << options_.timeout_seconds << " s";
    if (clock.stopped > 0) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%.1f", clock.stopped);
      out << " (this rank was itself stopped for " << seconds << " s of the wait)";
    }
    return out.str();
  }

  void check_root(int root, const char* what) const {
    DPRUN_CHECK(root >= 0 && root < size_, what, ": root ", root, " is not a rank of a group of ",
                size_);
  }

  void start_phase2(ReduceState& s) {
    // This rank's slice: the rank-order sum of every rank's copy of it.
    size_t me = static_cast<size_t>(rank_);
    size_t elem = dtype_size(s.tensor.dtype());
    auto* out =
        static_cast<uint8_t*>(s.tensor.raw_data()) + static_cast<size_t>(s.displs[me]) * elem;
    size_t slice_bytes = static_cast<size_t>(s.counts[me]) * elem;
    if (slice_bytes) {
      std::memcpy(out, s.received.data(), slice_bytes);
      for (size_t r = 1; r < static_cast<size_t>(size_); ++r)
        add_in_place(out, s.received.data() + r * slice_bytes, s.counts[me], s.tensor.dtype());
    }
    check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, s.tensor.raw_data(), s.counts.data(),
                          s.displs.data(), mpi_type(s.tensor.dtype()), gather_back_, &s.request),
          "MPI_Iallgatherv");
    s.phase2_started = true;
  }

  ProcessGroupOptions options_;
  MPI_Comm reduce_ = MPI_COMM_NULL, gather_back_ = MPI_COMM_NULL, control_ = MPI_COMM_NULL,
           probe_ = MPI_COMM_NULL;
  MPI_Op sum_float16_ = MPI_OP_NULL, sum_bfloat16_ = MPI_OP_NULL;
  int rank_ = 0, size_ = 1;
  std::deque<std::shared_ptr<ReduceState>> pending_;  // rank-order reductions in phase 1
  int64_t entered_[2] = {0, 0};                       // collectives started, per channel
  std::string stage_;                                 // see ProcessGroup::set_stage
  std::list<Reply> replies_;                          // answers to other ranks still being sent
  std::list<std::vector<int64_t>> question_buffers_;  // of late_ranks_answered
};

class MpiReduceWork : public CollectiveWork {
 public:
  MpiReduceWork(MpiGroup& group, std::shared_ptr<ReduceState> state)
      : group_(group), state_(std::move(state)) {}

  bool test() override {
    if (state_->order == ReduceOrder::RankOrder) {
      group_.advance();
      if (!state_->phase2_started) return false;
    }
    return test_request(state_->request, "all_reduce_sum");
  }

  void wait() override {
    group_.wait_for([&] { return test(); }, kReduce, state_->seq, "all-reduce");
  }

 private:
  MpiGroup& group_;
  std::shared_ptr<ReduceState> state_;
};

std::unique_ptr<CollectiveWork> MpiGroup::all_reduce_sum(Tensor tensor, ReduceOrder order) {
  DPRUN_CHECK(tensor.device().type == DeviceType::CPU,
              "all_reduce_sum: the tensor must be in host memory, not ", tensor.describe());
  MPI_Datatype type = mpi_type(tensor.dtype());
  int n = as_count(tensor.numel(), "all_reduce_sum");
  auto state = std::make_shared<ReduceState>();
  state->tensor = tensor;
  state->order = order;
  state->seq = ++entered_[kReduce];
  if (order == ReduceOrder::Any) {
    check(MPI_Iallreduce(MPI_IN_PLACE, tensor.raw_data(), n, type, sum_op(tensor.dtype()), reduce_,
                         &state->request),
          "MPI_Iallreduce");
    return std::make_unique<MpiReduceWork>(*this, state);
  }
  // Rank j owns elements [j n / P, (j + 1) n / P).
  auto p = static_cast<int64_t>(size_);
  state->counts.resize(static_cast<size_t>(size_));
  state->displs.resize(static_cast<size_t>(size_));
  for (int64_t j = 0; j < p; ++j) {
    int64_t begin = j * n / p, end = (j + 1) * n / p;
    state->displs[static_cast<size_t>(j)] = static_cast<int>(begin);
    state->counts[static_cast<size_t>(j)] = static_cast<int>(end - begin);
  }
  int mine = state->counts[static_cast<size_t>(rank_)];
  size_t elem = dtype_size(tensor.dtype());
  state->received.resize(static_cast<size_t>(mine) * elem * static_cast<size_t>(size_));
  state->recv_counts.assign(static_cast<size_t>(size_), mine);
  for (int r = 0; r < size_; ++r) state->recv_displs.push_back(r * mine);
  check(MPI_Ialltoallv(tensor.raw_data(), state->counts.data(), state->displs.data(), type,
                       state->received.data(), state->recv_counts.data(), state->recv_displs.data(),
                       type, reduce_, &state->scatter),
        "MPI_Ialltoallv");
  pending_.push_back(state);
  return std::make_unique<MpiReduceWork>(*this, state);
}

}  // namespace

bool mpi_supported() {
  return true;
}

std::shared_ptr<ProcessGroup> mpi_world_process_group(ProcessGroupOptions options) {
  return std::make_shared<MpiGroup>(options);
}

}  // namespace dprun
