// The models in memory and how long they stay. A request loads its model on first use (on the
// worker thread, so loading never races a generation); keep_alive then says how long it stays
// after the request: a duration, forever (negative), or not at all (0). Loading a model that
// does not fit beside the others in the RAM budget first unloads the least recently used ones;
// a model takes the memory its plan counts (ModelSpec::plan), or without one its file size.
//
// A model planned for several sequences (Plan::n_seq) holds one GenerationSession per sequence
// and a SequenceBatcher that decodes them together; generations on it run on several worker
// threads at once, each leasing a sequence. Loads, unloads and expiry happen only while no
// generation runs (the caller's rule: strata serve's WorkQueue keeps it); every call is
// thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "constrain/json_constraint.h"
#include "model/model_info.h"
#include "plan/plan.h"
#include "runtime/loaded_model.h"
#include "runtime/sequence_batcher.h"
#include "session/generation.h"
#include "store/store_report.h"
#include "template/chat_template.h"

namespace strata {

// How long a model stays loaded after a request; nullopt: forever.
using KeepAlive = std::optional<std::chrono::milliseconds>;

// A model the host can load, described from its file's header (no weights are read until a
// request needs them). The host knows a model by this description's address, so it must stay in
// place while the host lives (a front end's catalog of the models it serves).
struct ModelSpec {
    std::string name;  // what requests call it (errors name it)
    uint64_t file_bytes = 0;
    ModelInfo info;               // header, hyper-parameters and tensor table
    uint32_t served_context = 0;  // what the host allocates for it
    // The placement plan it loads with, made by the front end for served_context against the RAM
    // budget every model shares; nullopt: loaded whole (or as the load options say).
    std::optional<Plan> plan;
};

struct HostedModel {
    const ModelSpec* served = nullptr;
    std::unique_ptr<LoadedModel> model;
    // Null with one sequence: the session then drives the engine directly.
    std::unique_ptr<SequenceBatcher> batcher;
    // One per sequence: its KV cache and the tokens in it.
    std::vector<std::unique_ptr<GenerationSession>> sessions;
    std::vector<bool> leased;  // per sequence
    std::vector<std::chrono::steady_clock::time_point> sequence_used;
    int users = 0;                              // requests holding the model now
    std::optional<ChatTemplate> chat_template;  // nullopt: the file has none and no family fits
    std::unique_ptr<TokenMask> token_mask;      // structured output; built on first use
    std::chrono::steady_clock::time_point last_used;
    std::optional<std::chrono::steady_clock::time_point> expires;  // nullopt: never
    std::chrono::system_clock::time_point expires_wall;            // for /api/ps
};

// What /api/ps shows of a loaded model.
struct LoadedModelStatus {
    const ModelSpec* served;
    uint64_t resident_bytes;
    uint64_t gpu_bytes;
    uint32_t context;
    std::optional<std::chrono::system_clock::time_point> expires;  // nullopt: never
};

// What the models did since the host started: loads, unloads, and their stores' work
// (counted for the loaded models as of now, and for the unloaded ones as of their unload).
struct HostTotals {
    uint64_t loads = 0;
    uint64_t unloads = 0;
    uint64_t bytes_from_disk = 0;
    ExpertStreamStats experts;    // the expert caches of expert-stream models
    VramExpertStats gpu_experts;  // the GPU levels of the expert hierarchies
    BatcherStats batching;        // steps of models decoding several sequences together
};

class ModelHost {
  public:
    // ram_budget 0: no limit. It is the budget the models' plans were made against.
    ModelHost(ModelLoadOptions options, uint64_t ram_budget);

    // The model loaded and ready; `load_seconds` gets the time spent loading it now (0 when it
    // was already in memory).
    Result<HostedModel*> acquire(const ModelSpec& m, double& load_seconds);
    // Called when a request is done with the model. A keep-alive of 0 unloads it once the last
    // request using it is done.
    void release(HostedModel& h, const KeepAlive& keep_alive);
    // A free sequence of the model for a generation of `prompt`: the one whose cached tokens
    // share the longest prefix with it (the least recently used among equals; for an embedding,
    // which reuses no cached tokens, an empty prompt picks the least recently used). The caller
    // runs at most as many requests on a model as it has sequences (strata serve's WorkQueue
    // does), so one is always free.
    int lease_sequence(HostedModel& h, const std::vector<TokenId>& prompt);
    void return_sequence(HostedModel& h, int seq);
    void unload(const ModelSpec& m);
    bool is_loaded(const ModelSpec& m) const;
    // Unloads expired models; returns when the next one expires.
    std::optional<std::chrono::steady_clock::time_point> expire();

    // The counters since start (on the worker thread: the stores count as they run).
    HostTotals totals() const;

    // Any thread.
    std::vector<LoadedModelStatus> loaded_models() const;
    // Loads and unloads since start (the rest of HostTotals is totals()').
    std::pair<uint64_t, uint64_t> loads_and_unloads() const;

  private:
    void unload_locked(size_t index);

    ModelLoadOptions options_;
    uint64_t ram_budget_;
    std::mutex load_mu_;     // one load at a time; requests for the model being loaded wait
    mutable std::mutex mu_;  // guards hosted_ against loaded_models()
    std::vector<std::unique_ptr<HostedModel>> hosted_;
    HostTotals gone_;  // loads, unloads, and the store work of unloaded models
};

// A sequence of a hosted model leased for one request (ModelHost::lease_sequence), returned when
// this goes. A generation or an embedding runs in it while others run in the model's other
// sequences, evaluated in the same steps.
class SequenceLease {
  public:
    SequenceLease(ModelHost& host, HostedModel& h, const std::vector<TokenId>& prompt)
        : host_(host), h_(h), seq_(host.lease_sequence(h, prompt)) {}
    ~SequenceLease() {
        if (seq_ >= 0) host_.return_sequence(h_, seq_);
    }
    SequenceLease(const SequenceLease&) = delete;
    SequenceLease& operator=(const SequenceLease&) = delete;

    int seq() const { return seq_; }  // -1: every sequence was taken
    GenerationSession& session() const { return *h_.sessions[size_t(seq_)]; }

  private:
    ModelHost& host_;
    HostedModel& h_;
    int seq_;
};

}  // namespace strata
