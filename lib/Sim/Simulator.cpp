//===- Simulator.cpp - Event simulation of a step plan ----------*- C++ -*-===//
//
// Part of mtc. Two parts: an event engine (streams of commands run in order,
// events between them, copies sharing the link as a fluid), and the walk of
// the step program that queues the commands StreamExecutor queues, in its
// order and with its events (runtime/stream/StreamExecutor.cpp).
//
//===----------------------------------------------------------------------===//

#include "lib/Sim/Simulator.h"

#include "lib/Bundle/Plan.h"
#include "lib/Sim/Cost.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace mtc::sim {
namespace {

/// How a command uses the machine: a fixed duration, or bytes over one
/// direction of the link.
enum class Resource { Fixed, H2D, D2H };

struct Task {
  int stream = 0;
  Resource res = Resource::Fixed;
  double work = 0;    ///< seconds (Fixed) or bytes (copies)
  double latency = 0; ///< seconds before a copy's bytes move
  std::vector<int> deps;
  std::string label, category;
  double start = -1, end = -1;
  int blocker = -1; ///< the task whose end let this one start (-1: none)
  // While running.
  double remaining = 0, latencyLeft = 0;
};

/// Streams, events and the fluid simulation of their commands.
class Engine {
public:
  Engine(const Profile &p) : p(p) {}

  int stream(const std::string &name) {
    auto it = streamIds.find(name);
    if (it != streamIds.end())
      return it->second;
    int id = static_cast<int>(streams.size());
    streams.push_back({name, {}, {}, -1});
    streamIds[name] = id;
    return id;
  }

  /// Queues a command on \p s after the waits queued on \p s so far.
  int add(int s, Resource res, double work, const std::string &label,
          const std::string &category) {
    Task t;
    t.stream = s;
    t.res = res;
    t.work = std::max(0.0, work);
    t.latency = res == Resource::Fixed ? 0 : p.link.copyLatency;
    t.deps = std::move(streams[s].pendingDeps);
    streams[s].pendingDeps.clear();
    t.label = label;
    t.category = category;
    tasks.push_back(std::move(t));
    int id = static_cast<int>(tasks.size()) - 1;
    streams[s].queue.push_back(id);
    streams[s].last = id;
    return id;
  }

  /// Event \p ev now stands for the last command queued on \p s.
  void record(const std::string &ev, int s) { events[ev] = streams[s].last; }
  /// The next command queued on \p s waits for event \p ev (a no-op if it
  /// was never recorded or stands for nothing).
  void wait(int s, const std::string &ev) {
    auto it = events.find(ev);
    if (it != events.end() && it->second >= 0)
      streams[s].pendingDeps.push_back(it->second);
  }
  /// The next command on \p s waits for every stream's last command.
  void waitAll(int s) {
    for (const StreamState &st : streams)
      if (st.last >= 0)
        streams[s].pendingDeps.push_back(st.last);
  }

  Status run();

  /// Threads of the host's AdamW beside a device on the host's cores: the
  /// cores its kernels leave free, at least one (as `mtc train` sizes the
  /// optimizer's pool).
  double optimizerThreads() const {
    return static_cast<double>(
        std::max<int64_t>(1, p.host.cores - p.device.hostThreads));
  }

  std::vector<Task> tasks;
  struct StreamState {
    std::string name;
    std::vector<int> queue;
    std::vector<int> pendingDeps;
    int last;
  };
  std::vector<StreamState> streams;

private:
  const Profile &p;
  std::map<std::string, int> streamIds;
  std::map<std::string, int> events;
};

Status Engine::run() {
  std::vector<size_t> head(streams.size(), 0);
  std::vector<int> running;
  double t = 0;
  size_t done = 0;
  const double eps = 1e-15;
  auto finish = [&](int id) {
    tasks[id].end = t;
    ++head[tasks[id].stream];
    ++done;
  };
  while (done < tasks.size()) {
    // Start every stream head whose events have completed.
    bool started = true;
    while (started) {
      started = false;
      for (size_t s = 0; s < streams.size(); ++s) {
        if (head[s] >= streams[s].queue.size())
          continue;
        int id = streams[s].queue[head[s]];
        Task &k = tasks[id];
        if (k.start >= 0)
          continue;
        bool ready = true;
        int blocker = head[s] > 0 ? streams[s].queue[head[s] - 1] : -1;
        for (int d : k.deps) {
          if (tasks[d].end < 0) {
            ready = false;
            break;
          }
          if (blocker < 0 || tasks[d].end > tasks[blocker].end)
            blocker = d;
        }
        if (!ready)
          continue;
        k.start = t;
        k.blocker = blocker;
        k.remaining = k.work;
        k.latencyLeft = k.latency;
        if (k.remaining <= 0 && k.latencyLeft <= 0) {
          finish(id);
        } else {
          running.push_back(id);
        }
        started = true;
      }
    }
    if (running.empty()) {
      if (done < tasks.size())
        return Status::error("simulated step deadlocked: a command waits for "
                             "an event that never completes");
      break;
    }
    // Rates: copies in one direction share its bandwidth; while the other
    // direction copies too, each keeps duplex_factor of it.
    int nH = 0, nD = 0;
    for (int id : running) {
      const Task &k = tasks[id];
      if (k.latencyLeft > 0)
        continue;
      nH += k.res == Resource::H2D;
      nD += k.res == Resource::D2H;
    }
    // A device on the host's cores (device.host_threads, the CPU device):
    // its kernels' threads and the host's commands (one thread each, AdamW
    // the optimizer's pool) share host.cores fairly; past the cores, every
    // command slows to cores / threads wanted (a kernel's threads work on
    // fixed chunks, so it waits for the slowest).
    double share = 1;
    if (p.device.hostThreads > 0) {
      double want = 0;
      bool kernels = false;
      for (int id : running) {
        const Task &k = tasks[id];
        if (k.latencyLeft > 0)
          continue;
        if (k.category == "compute")
          kernels = true;
        else
          want += k.category == "optimizer" ? optimizerThreads() : 1.0;
      }
      if (kernels)
        want += static_cast<double>(p.device.hostThreads);
      if (want > static_cast<double>(p.host.cores))
        share = static_cast<double>(p.host.cores) / want;
    }
    auto rate = [&](const Task &k) {
      if (k.res == Resource::Fixed)
        return share;
      bool h = k.res == Resource::H2D;
      double bw = h ? p.link.h2dBandwidth : p.link.d2hBandwidth;
      if ((h ? nD : nH) > 0)
        bw *= p.link.duplexFactor;
      return share * bw / std::max(1, h ? nH : nD);
    };
    double dt = std::numeric_limits<double>::infinity();
    for (int id : running) {
      const Task &k = tasks[id];
      dt = std::min(dt,
                    k.latencyLeft > 0 ? k.latencyLeft : k.remaining / rate(k));
    }
    std::vector<int> still;
    for (int id : running) {
      Task &k = tasks[id];
      if (k.latencyLeft > 0) {
        k.latencyLeft -= dt;
        if (k.latencyLeft <= eps * std::max(1.0, k.latency))
          k.latencyLeft = 0;
        if (k.latencyLeft > 0 || k.remaining > 0) {
          still.push_back(id);
          continue;
        }
      } else {
        double r = rate(k);
        k.remaining -= dt * r;
        if (k.remaining > 1e-12 * std::max(1.0, k.work) &&
            k.remaining / r > eps) {
          still.push_back(id);
          continue;
        }
        k.remaining = 0;
      }
      still.push_back(~id);
    }
    t += dt;
    running.clear();
    for (int v : still) {
      if (v >= 0)
        running.push_back(v);
      else
        finish(~v);
    }
  }
  return Status::success();
}

/// The step program queued as StreamExecutor queues it.
class Walker {
public:
  Walker(const bundle::Bundle &b, const Profile &prof, const SimOptions &o)
      : b(b), p(*b.step), prof(prof), o(o), precision(bundle::planPrecision(b)),
        cost(prof, precision), e(prof) {}

  Status build();
  SimResult result();

private:
  struct LayerInfo {
    int64_t params = 0;     ///< one instance's, experts included
    Cost forward, backward; ///< one micro-batch
    /// backward_full (mixed recomputation: an instance that kept its input
    /// alone recomputes the whole layer), one micro-batch.
    Cost backwardFull;
  };
  /// Mixed recomputation (the plan's selective_layers): the instances past
  /// the first S of the stack, which keep their input alone.
  std::set<std::pair<std::string, int64_t>> fullInstances;

  double adamwSeconds(int64_t params) const {
    return static_cast<double>(params) *
           static_cast<double>(24 + o.gradBytesPerParam) /
           prof.host.adamwBytesPerS;
  }
  int64_t paramBytes() const {
    return precision == bundle::Precision::BF16 ? 2 : 4;
  }
  void compute(const std::string &label, const Cost &c) {
    e.add(sCompute, Resource::Fixed, c.seconds, label, "compute");
    flops += c.flops;
  }
  /// Seconds of the host conversion of \p params fp32 values to bf16
  /// (4 bytes read and 2 written per value).
  double convertSeconds(int64_t params) const {
    return 6.0 * static_cast<double>(params) /
           convertBytesPerSecond(prof, o.convertThreads);
  }
  void copyIn(int s, int64_t params, const std::string &label) {
    if (precision == bundle::Precision::BF16 && o.convertOnHost)
      e.add(s, Resource::Fixed, convertSeconds(params), "convert " + label,
            "host-memory");
    const double bytes = static_cast<double>(params) * paramBytes();
    e.add(s, Resource::H2D, bytes, "weights " + label, "h2d");
    h2dBytes += bytes;
  }
  void copy(int s, bool toDevice, double bytes, const std::string &label) {
    e.add(s, toDevice ? Resource::H2D : Resource::D2H, bytes, label,
          toDevice ? "h2d" : "d2h");
    (toDevice ? h2dBytes : d2hBytes) += bytes;
  }
  void adamw(int64_t params, const std::string &label) {
    e.add(sOpt, Resource::Fixed, adamwSeconds(params), "adamw " + label,
          "optimizer");
  }
  void loadWeights(const std::string &layer, int64_t j);
  /// The start of the backward of segment [s0, top] (segment checkpointing,
  /// StreamExecutor::recomputeSegment): the checkpoint of s0 into slot 0 of
  /// the segment buffer, the weights of s0 .. top - 1 into their slots, and
  /// their forwards over every micro-batch as one launch.
  void recomputeSegment(const LayerInfo &li, const std::string &layer,
                        int64_t s0, int64_t top, double boundary);
  void gradsToHost(int64_t params, const std::string &label);
  Status runLoop(const bundle::PlanCommand &c);
  /// The compute command of instance step \p k with host activations:
  /// per micro-batch its input, checkpoint and output copies on h2d.act /
  /// d2h.act around one launch (StreamExecutor::computeHostActivations).
  void hostActivationCompute(const LayerInfo &li, const std::string &layer,
                             int64_t k, int64_t count, int64_t i, size_t slot,
                             bool forward, bool saveHost, bool restoreHost,
                             int64_t ckpt, double boundary);

  const bundle::Bundle &b;
  const bundle::StepPlan &p;
  const Profile &prof;
  const SimOptions &o;
  bundle::Precision precision;
  CostModel cost;
  Engine e;
  int sCompute = 0, sH2D = 0, sD2H = 0, sOpt = 0, sActIn = -1, sActOut = -1;
  bool hostCheckpoints = false, hostActivations = false, hostStage = false,
       immediate = false;
  std::map<std::string, LayerInfo> layers;
  int64_t modelParams = 0;
  std::set<std::pair<std::string, int64_t>> pending;
  bool modelPending = false;
  std::vector<std::pair<std::string, int64_t>> slotHolds;
  int64_t ringNext = 0, weightLoads = 0;
  double flops = 0, h2dBytes = 0, d2hBytes = 0;
  const bundle::Function *fb = nullptr;
  bundle::StagePlan stagePlan;
};

void Walker::loadWeights(const std::string &layer, int64_t j) {
  size_t s = static_cast<size_t>(j % p.prefetchDepth);
  if (slotHolds[s] == std::make_pair(layer, j))
    return;
  e.wait(sH2D, "slotFree." + std::to_string(s));
  copyIn(sH2D, layers.at(layer).params, layer + "." + std::to_string(j));
  e.record("weights." + std::to_string(s), sH2D);
  slotHolds[s] = {layer, j};
  ++weightLoads;
}

void Walker::gradsToHost(int64_t params, const std::string &label) {
  double bytes = 4.0 * static_cast<double>(params);
  if (!immediate) {
    // bf16 gradients (--grad-dtype bf16): the fp32 sums come back as they
    // are and the stream's host thread converts them, in stream order,
    // before the next command of d2h (CudaDevice::copyToHost with
    // Convert::F32ToBF16); converted on the device, only bf16 would move.
    const bool bf16 = o.gradBytesPerParam == 2;
    if (bf16 && !o.convertOnHost)
      bytes = 2.0 * static_cast<double>(params);
    copy(sD2H, false, bytes, "grads " + label);
    if (bf16 && o.convertOnHost)
      e.add(sD2H, Resource::Fixed, convertSeconds(params),
            "convert grads " + label, "host-memory");
    return;
  }
  std::string r = std::to_string(ringNext++ % bundle::kGradRingSlots);
  e.wait(sD2H, "ringFree." + r);
  copy(sD2H, false, bytes, "grads " + label);
  e.record("ringFull." + r, sD2H);
  e.wait(sOpt, "ringFull." + r);
  adamw(params, label);
  e.record("ringFree." + r, sOpt);
}

Status Walker::build() {
  if (!b.step)
    return Status::error("the bundle has no step plan");
  auto fit = b.functions.find("forward_backward");
  if (fit == b.functions.end())
    return Status::error("the bundle has no forward_backward function");
  fb = &fit->second;
  if (prof.link.h2dBandwidth <= 0 || prof.link.d2hBandwidth <= 0 ||
      prof.host.adamwBytesPerS <= 0 || prof.host.convertBytesPerS <= 0 ||
      prof.device.memoryBandwidth <= 0 || prof.peakFlops("bf16") <= 0 ||
      prof.peakFlops("fp32") <= 0)
    return Status::error("profile '" + prof.name + "': rates must be positive");
  const int64_t M = p.microBatches;
  if (M < 1 || p.prefetchDepth < 1)
    return Status::error("step plan: micro_batches and prefetch_depth must "
                         "be positive");
  if (p.checkpointEvery < 1)
    return Status::error("step plan: checkpoint_every must be >= 1");
  if (p.checkpointEvery > 1 && p.recompute != "full")
    return Status::error("step plan: checkpoint_every " +
                         std::to_string(p.checkpointEvery) +
                         " needs recompute 'full', not '" + p.recompute + "'");
  if (p.checkpointEvery > p.prefetchDepth)
    return Status::error("step plan: checkpoint_every " +
                         std::to_string(p.checkpointEvery) +
                         " needs at least as many weight slots "
                         "(prefetch_depth " +
                         std::to_string(p.prefetchDepth) + ")");
  if (o.gradBytesPerParam != 2 && o.gradBytesPerParam != 4)
    return Status::error("gradients must be 2 (bf16) or 4 (fp32) bytes per "
                         "parameter");
  hostCheckpoints = p.buffer("checkpoints.host") != nullptr;
  hostActivations = p.buffer("activations.host") != nullptr;
  hostStage = p.buffer("stage.host") != nullptr;
  immediate = p.buffer("grads.host") != nullptr;
  sCompute = e.stream("compute");
  sH2D = e.stream("h2d");
  sD2H = e.stream("d2h");
  sOpt = e.stream("optimizer");
  if (hostActivations) {
    sActIn = e.stream("h2d.act");
    sActOut = e.stream("d2h.act");
  }
  // Parameter counts saturate (lib/Bundle/Plan.h), as every size here.
  using bundle::addSize, bundle::mulSize;
  for (const bundle::Param &q : b.params)
    modelParams = addSize(modelParams, q.numel());
  for (const bundle::Layer &l : b.layers) {
    LayerInfo li;
    for (const bundle::Param &q : l.params)
      li.params = addSize(li.params, q.numel());
    for (const bundle::Expert &x : l.experts)
      for (const bundle::Param &q : x.params)
        li.params = addSize(li.params, mulSize(q.numel(), x.count));
    auto f = l.functions.find("forward"), g = l.functions.find("backward");
    if (f != l.functions.end())
      li.forward = cost.function(f->second, &l, p.batch, p.seq);
    if (g != l.functions.end())
      li.backward = cost.function(g->second, &l, p.batch, p.seq);
    auto h = l.functions.find("backward_full");
    if (h != l.functions.end())
      li.backwardFull = cost.function(h->second, &l, p.batch, p.seq);
    layers[l.name] = li;
  }
  if (p.selectiveLayers >= 0) {
    if (p.recompute != "selective")
      return Status::error("step plan: selective_layers needs recompute "
                           "'selective', not '" +
                           p.recompute + "'");
    int64_t stack = 0;
    for (const bundle::PlanCommand &c : p.program) {
      if (c.op != "layers" || c.strAttr("direction") != "forward")
        continue;
      const bundle::Layer *l = b.layer(c.strAttr("layer"));
      if (!l || !l->functions.count("backward_full"))
        return Status::error("step plan: selective_layers needs layer '" +
                             c.strAttr("layer") +
                             "' to have a backward_full function");
      const int64_t first = c.intAttr("first"), count = c.intAttr("count");
      for (int64_t i = first; i < first + count; ++i, ++stack)
        if (stack >= p.selectiveLayers)
          fullInstances.insert({l->name, i});
    }
  }
  if (hostStage)
    stagePlan =
        bundle::planStage(bundle::stageProgram(*fb, precision, p.batch, p.seq));
  slotHolds.assign(static_cast<size_t>(p.prefetchDepth), {"", -1});
  // The steady state: the previous step's updates are pending (deferred).
  if (!immediate) {
    modelPending = true;
    for (const bundle::Layer &l : b.layers)
      for (int64_t j = 0; j < l.count; ++j)
        pending.insert({l.name, j});
  }
  for (const bundle::PlanCommand &c : p.program) {
    if (c.op == "load_model_weights") {
      if (modelPending) {
        adamw(modelParams, "model");
        e.record("modelUpdated", sOpt);
        e.wait(sH2D, "modelUpdated");
        modelPending = false;
      }
      copyIn(sH2D, modelParams, "model");
      e.record("modelWeights", sH2D);
      e.wait(sCompute, "modelWeights");
      Cost z;
      z.seconds = cost.memorySeconds(4.0 * static_cast<double>(modelParams));
      compute("zero model grads", z);
    } else if (c.op == "stage") {
      int64_t begin = c.intAttr("begin"), end = c.intAttr("end");
      std::string range =
          "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
      Cost one =
          cost.function(*fb, nullptr, p.batch, p.seq, 0,
                        static_cast<size_t>(begin), static_cast<size_t>(end));
      if (!hostStage) {
        compute("stage ops " + range, one.scaled(static_cast<double>(M)));
        continue;
      }
      const bundle::StagePlan::Segment *seg = stagePlan.segment(begin);
      for (int64_t mb = 0; mb < M; ++mb) {
        std::string what = " " + range + " mb " + std::to_string(mb);
        e.wait(sCompute, "hostAct." + std::to_string(mb));
        if (seg && seg->inBytes > 0)
          copy(sCompute, true, static_cast<double>(seg->inBytes),
               "stage in" + what);
        compute("stage ops" + what, one);
        if (seg && seg->outBytes > 0)
          copy(sCompute, false, static_cast<double>(seg->outBytes),
               "stage out" + what);
      }
      e.record("stageHost", sCompute);
    } else if (c.op == "layers") {
      if (Status st = runLoop(c); !st)
        return st;
    } else if (c.op == "return_model_grads") {
      e.record("modelGrads", sCompute);
      e.wait(sD2H, "modelGrads");
      gradsToHost(modelParams, "model");
    } else {
      return Status::error("step plan: unknown command '" + c.op + "'");
    }
  }
  // Between steps: the global gradient norm over the host gradients.
  if (!immediate && o.clip) {
    int host = e.stream("host");
    e.waitAll(host);
    int64_t params = modelParams;
    for (const bundle::Layer &l : b.layers)
      params = bundle::addSize(
          params, bundle::mulSize(layers.at(l.name).params, l.count));
    e.add(host, Resource::Fixed,
          static_cast<double>(o.gradBytesPerParam) *
              static_cast<double>(params) / prof.host.memoryBandwidth,
          "gradient norm", "host-memory");
  }
  return e.run();
}

Status Walker::runLoop(const bundle::PlanCommand &c) {
  const int64_t M = p.microBatches, depth = p.prefetchDepth,
                K = p.checkpointEvery;
  const std::string layer = c.strAttr("layer");
  if (!layers.count(layer))
    return Status::error("step plan: layers names unknown layer '" + layer +
                         "'");
  const LayerInfo &li = layers.at(layer);
  const bool forward = c.strAttr("direction") == "forward";
  const int64_t first = c.intAttr("first"), count = c.intAttr("count");
  const int64_t opIndex = c.intAttr("op_index");
  if (opIndex < 0 || static_cast<size_t>(opIndex) >= fb->ops.size())
    return Status::error("step plan: layers op_index out of range");
  const bundle::Op &op = fb->ops[static_cast<size_t>(opIndex)];
  const DType act =
      precision == bundle::Precision::BF16 ? DType::BF16 : DType::F32;
  const double boundary = static_cast<double>(
      bundle::elementBytes(act) *
      bundle::concreteNumel(fb->values.at(op.operands.at(0)).shape, p.batch,
                            p.seq));
  int64_t ckpt = c.intAttr("checkpoint_bytes", 0);
  if (ckpt <= 0)
    ckpt = bundle::align64(static_cast<int64_t>(boundary));
  std::vector<int64_t> order;
  for (int64_t k = 0; k < count; ++k)
    order.push_back(forward ? first + k : first + count - 1 - k);
  auto targets = [&](int64_t k, int64_t ahead) {
    std::vector<int64_t> t;
    if (k == 0) {
      for (int64_t a = 0; a <= ahead && a < count; ++a)
        t.push_back(order[static_cast<size_t>(a)]);
    } else if (k + ahead < count) {
      t.push_back(order[static_cast<size_t>(k + ahead)]);
    }
    return t;
  };
  Cost move;
  move.seconds = cost.memorySeconds(2 * boundary * static_cast<double>(M));
  if (!hostActivations)
    compute("loop input", move);
  for (int64_t k = 0; k < count; ++k) {
    const int64_t i = order[static_cast<size_t>(k)];
    // Mixed recomputation: an instance past the first S of the stack keeps
    // its input alone and runs backward_full.
    LayerInfo lk = li;
    int64_t ck = ckpt;
    if (fullInstances.count({layer, i})) {
      lk.backward = li.backwardFull;
      ck = bundle::align64(static_cast<int64_t>(boundary));
    }
    const size_t s = static_cast<size_t>(i % depth);
    const std::string ss = std::to_string(s), st = std::to_string(k % 2),
                      gs = std::to_string(k % 2);
    const std::string tag = layer + "." + std::to_string(i);
    bool saveHost = false, restoreHost = false, returnGrads = false;
    for (const bundle::PlanCommand &x : c.body) {
      if (x.op == "optimizer_update") {
        for (int64_t j : targets(k, x.intAttr("ahead"))) {
          if (!pending.erase({layer, j}))
            continue;
          std::string sj = std::to_string(j % depth);
          adamw(li.params, layer + "." + std::to_string(j));
          e.record("updated." + sj, sOpt);
          e.wait(sH2D, "updated." + sj);
        }
      } else if (x.op == "prefetch") {
        for (int64_t j : targets(k, x.intAttr("ahead")))
          loadWeights(layer, j);
      } else if (x.op == "wait_weights") {
        loadWeights(layer, i);
        e.wait(sCompute, "weights." + ss);
      } else if (x.op == "save") {
        saveHost = x.strAttr("to") == "host";
      } else if (x.op == "restore") {
        // Segment checkpointing restores a segment's checkpoint once, for
        // its recomputation (recomputeSegment).
        restoreHost = x.strAttr("from") == "host" && K == 1;
        if (restoreHost && !hostActivations) {
          e.wait(sH2D, "stagingRead." + st);
          e.wait(sH2D, "stagingFree.0");
          e.wait(sH2D, "stagingFree.1");
          copy(sH2D, true, static_cast<double>(M * ck), "restore " + tag);
          e.record("restored." + st, sH2D);
          e.wait(sCompute, "restored." + st);
        }
      } else if (x.op == "grad_return") {
        returnGrads = true;
      } else if (x.op == "compute") {
        // Segment checkpointing: only the first instance of a segment keeps
        // its checkpoint; the backward of a segment starts at its last
        // instance by recomputing the others' forwards.
        const int64_t s0 = first + (i - first) / K * K;
        if (i != s0)
          saveHost = false;
        if (!forward && K > 1) {
          const int64_t top = std::min(s0 + K, first + count) - 1;
          if (i == top)
            recomputeSegment(li, layer, s0, top, boundary);
        }
        if (hostActivations) {
          hostActivationCompute(lk, layer, k, count, i, s, forward, saveHost,
                                restoreHost, ck, boundary);
        } else if (forward) {
          if (saveHost)
            e.wait(sCompute, "stagingFree." + st);
          compute("forward " + tag, li.forward.scaled(static_cast<double>(M)));
          e.record("slotFree." + ss, sCompute);
          if (saveHost) {
            e.record("staged." + st, sCompute);
            e.wait(sD2H, "staged." + st);
            copy(sD2H, false, static_cast<double>(M * ck), "offload " + tag);
            e.record("stagingFree." + st, sD2H);
          }
        } else {
          e.wait(sCompute, "gradFree." + gs);
          Cost c2 = lk.backward.scaled(static_cast<double>(M));
          c2.seconds +=
              cost.memorySeconds(4.0 * static_cast<double>(li.params));
          compute("backward " + tag, c2);
          e.record("slotFree." + ss, sCompute);
          e.record("gradReady." + gs, sCompute);
          if (restoreHost)
            e.record("stagingRead." + st, sCompute);
        }
      } else {
        return Status::error("step plan: unknown command '" + x.op +
                             "' in a layers body");
      }
    }
    if (returnGrads) {
      e.wait(sD2H, "gradReady." + gs);
      gradsToHost(li.params, tag);
      e.record("gradFree." + gs, sD2H);
    }
  }
  if (!hostActivations)
    compute("loop result", move);
  return Status::success();
}

void Walker::recomputeSegment(const LayerInfo &li, const std::string &layer,
                              int64_t s0, int64_t top, double boundary) {
  const int64_t M = p.microBatches;
  const std::string tag = layer + "." + std::to_string(s0);
  if (hostCheckpoints) {
    // From host memory on the compute stream, once every offload queued
    // before has landed.
    e.wait(sCompute, "stagingFree.0");
    e.wait(sCompute, "stagingFree.1");
    for (int64_t mb = 0; mb < M; ++mb)
      copy(sCompute, true, boundary,
           "restore " + tag + " mb " + std::to_string(mb));
  } else {
    Cost in;
    in.seconds = cost.memorySeconds(2 * boundary * static_cast<double>(M));
    compute("segment input " + tag, in);
  }
  // The other instances' weights stay in their slots until their backward.
  for (int64_t j = s0; j < top; ++j) {
    loadWeights(layer, j);
    e.wait(sCompute, "weights." + std::to_string(j % p.prefetchDepth));
  }
  if (top > s0)
    compute("recompute " + tag + ".." + std::to_string(top - 1),
            li.forward.scaled(static_cast<double>(M * (top - s0))));
}

void Walker::hostActivationCompute(const LayerInfo &li,
                                   const std::string &layer, int64_t k,
                                   int64_t count, int64_t i, size_t slot,
                                   bool forward, bool saveHost,
                                   bool restoreHost, int64_t ckpt,
                                   double boundary) {
  const int64_t M = p.microBatches;
  const bool first = k == 0, last = k + 1 == count;
  const std::string gs = std::to_string(k % 2);
  const std::string tag = layer + "." + std::to_string(i);
  if (!forward)
    e.wait(sCompute, "gradFree." + gs);
  for (int64_t mb = 0; mb < M; ++mb) {
    const std::string j = std::to_string((k * M + mb) % 2);
    const std::string m = std::to_string(mb);
    const std::string what = tag + " mb " + m;
    if (!first || hostStage) {
      e.wait(sActIn, "actInFree." + j);
      e.wait(sActIn, "hostAct." + m);
      if (first)
        e.wait(sActIn, "stageHost");
      copy(sActIn, true, boundary, "activation in " + what);
      e.record("actIn." + j, sActIn);
      e.wait(sCompute, "actIn." + j);
    }
    if (restoreHost) {
      e.wait(sActIn, "stagingRead." + j);
      e.wait(sActIn, "stagingFree.0");
      e.wait(sActIn, "stagingFree.1");
      copy(sActIn, true, static_cast<double>(ckpt), "restore " + what);
      e.record("restored." + j, sActIn);
      e.wait(sCompute, "restored." + j);
    }
    e.wait(sCompute, "actOutFree." + j);
    if (saveHost)
      e.wait(sCompute, "stagingFree." + j);
    Cost c = forward ? li.forward : li.backward;
    if (!forward && mb == 0)
      c.seconds += cost.memorySeconds(4.0 * static_cast<double>(li.params));
    compute((forward ? "forward " : "backward ") + what, c);
    e.record("actInFree." + j, sCompute);
    e.record("actOut." + j, sCompute);
    if (saveHost) {
      e.record("staged." + j, sCompute);
      e.wait(sActOut, "staged." + j);
      copy(sActOut, false, static_cast<double>(ckpt), "offload " + what);
      e.record("stagingFree." + j, sActOut);
    }
    if (restoreHost)
      e.record("stagingRead." + j, sCompute);
    if (!last || hostStage) {
      e.wait(sActOut, "actOut." + j);
      copy(sActOut, false, boundary, "activation out " + what);
      e.record("actOutFree." + j, sActOut);
      e.record("hostAct." + m, sActOut);
    }
  }
  e.record("slotFree." + std::to_string(slot), sCompute);
  if (!forward)
    e.record("gradReady." + gs, sCompute);
}

SimResult Walker::result() {
  SimResult r;
  r.commands = static_cast<int64_t>(e.tasks.size());
  r.weightLoads = weightLoads;
  r.h2dBytes = h2dBytes;
  r.d2hBytes = d2hBytes;
  r.hardwareFlops = flops;
  for (const Task &k : e.tasks) {
    r.stepSeconds = std::max(r.stepSeconds, k.end);
    r.busy[e.streams[k.stream].name] += k.end - k.start;
    if (k.category == "optimizer")
      r.optimizerSeconds += k.end - k.start;
  }
  r.computeSeconds = r.busy["compute"];
  // Attribute every interval in which the compute stream did no device
  // work to what it waited for, following the chain of blockers: a span
  // [from, to) is charged to the task that ran in it, and what lies before
  // that task's start to its own blocker.
  std::vector<std::pair<double, double>> idle;
  auto charge = [&](int id, double from, double to) {
    while (id >= 0 && to > from) {
      const Task &k = e.tasks[static_cast<size_t>(id)];
      double a = std::max(from, k.start), z = std::min(to, k.end);
      if (z > a) {
        std::string cat = k.category;
        if (cat != "compute")
          r.exposed[cat] += z - a;
      }
      to = std::min(to, k.start);
      id = k.blocker;
    }
  };
  double prevEnd = 0;
  for (int id : e.streams[static_cast<size_t>(sCompute)].queue) {
    const Task &k = e.tasks[static_cast<size_t>(id)];
    if (k.category != "compute")
      continue;
    if (k.start > prevEnd)
      charge(k.blocker, prevEnd, k.start);
    prevEnd = std::max(prevEnd, k.end);
  }
  // The tail after the last device work: the latest-ending command.
  int lastId = -1;
  for (size_t id = 0; id < e.tasks.size(); ++id)
    if (lastId < 0 ||
        e.tasks[id].end > e.tasks[static_cast<size_t>(lastId)].end)
      lastId = static_cast<int>(id);
  if (lastId >= 0 && r.stepSeconds > prevEnd)
    charge(lastId, prevEnd, r.stepSeconds);
  r.exposedCopySeconds = r.exposed["h2d"] + r.exposed["d2h"];
  r.optimizerHiddenSeconds =
      std::max(0.0, r.optimizerSeconds - r.exposed["optimizer"]);
  double idleTotal = std::max(0.0, r.stepSeconds - r.computeSeconds);
  r.bottleneck = "compute";
  if (idleTotal > 0.05 * r.stepSeconds) {
    double best = 0;
    for (const char *cat : {"h2d", "d2h", "optimizer", "host-memory"})
      if (r.exposed[cat] > best) {
        best = r.exposed[cat];
        r.bottleneck = cat;
      }
  }
  for (const char *cat : {"h2d", "d2h", "optimizer", "host-memory"})
    r.exposed[cat] += 0; // every key present
  if (o.keepSpans)
    for (const Task &k : e.tasks)
      r.spans.push_back(
          {e.streams[k.stream].name, k.label, k.category, k.start, k.end});
  return r;
}

} // namespace

double convertBytesPerSecond(const Profile &profile, int64_t threads) {
  if (threads <= 0)
    threads = std::clamp<int64_t>(profile.host.cores / 2, 1, 8);
  double rate = static_cast<double>(threads) * profile.host.convertBytesPerS;
  return profile.host.memoryBandwidth > 0
             ? std::min(rate, profile.host.memoryBandwidth)
             : rate;
}

Expected<SimResult> simulateStep(const bundle::Bundle &b,
                                 const Profile &profile,
                                 const SimOptions &options) {
  if (!b.step)
    return Status::error("the bundle has no step plan (compile it with "
                         "--device-memory)");
  Walker w(b, profile, options);
  if (Status st = w.build(); !st)
    return st;
  SimResult r = w.result();
  // The profile's bounds (Profile.cpp) keep every time finite and positive
  // for the sizes a plan may have; a result that is not is refused rather
  // than printed as inf or nan.
  double sums[] = {r.stepSeconds, r.computeSeconds, r.hardwareFlops,
                   r.h2dBytes,    r.d2hBytes,       r.optimizerSeconds};
  for (double v : sums)
    if (!std::isfinite(v) || v < 0)
      return Status::error("the simulated step on profile '" + profile.name +
                           "' is not finite (its rates are out of "
                           "proportion to the plan's sizes)");
  if (!(r.stepSeconds > 0))
    return Status::error("the simulated step on profile '" + profile.name +
                         "' takes no time (its rates are out of proportion "
                         "to the plan's sizes)");
  return r;
}

} // namespace mtc::sim
