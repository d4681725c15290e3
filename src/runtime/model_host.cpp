#include "runtime/model_host.h"

#include <algorithm>

namespace strata {

namespace {
using SteadyClock = std::chrono::steady_clock;

// What a model will hold in RAM: what its plan counts for it (weights, caches, slots, KV cache,
// the engine's activations, I/O buffers; not the process, which every plan counts once more);
// without a plan, the whole file, at most the budget.
uint64_t ram_estimate(const ModelSpec& m, uint64_t budget) {
    if (m.plan) return m.plan->memory.model();
    return budget ? std::min(m.file_bytes, budget) : m.file_bytes;
}

void add_steps(BatcherStats& into, const SequenceBatcher& b) {
    const BatcherStats s = b.stats();
    into.steps += s.steps;
    into.tokens += s.tokens;
    into.decode_tokens += s.decode_tokens;
    into.widest_step = std::max(into.widest_step, s.widest_step);
    into.sequence_steps += s.sequence_steps;
}

// What the process holds whatever is loaded, as the plans count it (the same in each).
uint64_t process_estimate(const ModelSpec& m) {
    return m.plan ? m.plan->memory.process() : 0;
}
}  // namespace

ModelHost::ModelHost(ModelLoadOptions options, uint64_t ram_budget)
    : options_(std::move(options)), ram_budget_(ram_budget) {}

bool ModelHost::is_loaded(const ModelSpec& m) const {
    std::lock_guard lock(mu_);
    return std::any_of(hosted_.begin(), hosted_.end(),
                       [&](const auto& h) { return h->served == &m; });
}

Result<HostedModel*> ModelHost::acquire(const ModelSpec& m, double& load_seconds) {
    load_seconds = 0;
    std::lock_guard loading(load_mu_);
    {
        std::lock_guard lock(mu_);
        for (auto& h : hosted_) {
            if (h->served == &m) {
                h->last_used = SteadyClock::now();
                h->expires.reset();  // not while in use
                ++h->users;
                return h.get();
            }
        }
        // Make room: unload the least recently used models until this one fits.
        if (ram_budget_) {
            const uint64_t need = ram_estimate(m, ram_budget_);
            auto used = [&] {
                uint64_t sum = 0, process = process_estimate(m);
                for (const auto& h : hosted_) {
                    sum += ram_estimate(*h->served, ram_budget_);
                    process = std::max(process, process_estimate(*h->served));
                }
                return sum + process;
            };
            for (;;) {
                // Models in use stay (strata serve's WorkQueue runs one model at a time, so
                // none is).
                std::optional<size_t> lru;
                for (size_t i = 0; i < hosted_.size(); ++i) {
                    if (hosted_[i]->users > 0) continue;
                    if (!lru || hosted_[i]->last_used < hosted_[*lru]->last_used) lru = i;
                }
                if (!lru || used() + need <= ram_budget_) break;
                unload_locked(*lru);
            }
        }
    }
    const auto t0 = SteadyClock::now();
    ModelLoadOptions opts = options_;
    opts.engine.n_ctx = m.served_context;
    // The catalog read the file's description at start; a copy saves parsing it again.
    auto loaded = LoadedModel::load(m.info, m.plan, opts);
    if (!loaded) return err("loading ", m.name, ": ", loaded.error().message);
    auto h = std::make_unique<HostedModel>();
    h->served = &m;
    h->model = std::move(*loaded);
    engine::Engine& engine = *h->model->engine;
    if (engine.n_seq() > 1) h->batcher = std::make_unique<SequenceBatcher>(engine);
    for (uint32_t seq = 0; seq < engine.n_seq(); ++seq) {
        h->sessions.push_back(std::make_unique<GenerationSession>(engine, h->model->tokenizer,
                                                                  int(seq), h->batcher.get()));
    }
    h->leased.assign(engine.n_seq(), false);
    h->sequence_used.assign(engine.n_seq(), SteadyClock::time_point{});
    h->users = 1;
    if (auto t = ChatTemplate::from_gguf(h->model->info.file)) h->chat_template = std::move(*t);
    h->last_used = SteadyClock::now();
    load_seconds = std::chrono::duration<double>(h->last_used - t0).count();
    std::lock_guard lock(mu_);
    hosted_.push_back(std::move(h));
    ++gone_.loads;
    return hosted_.back().get();
}

void ModelHost::release(HostedModel& h, const KeepAlive& keep_alive) {
    std::lock_guard lock(mu_);
    h.last_used = SteadyClock::now();
    --h.users;
    if (keep_alive) {
        h.expires = h.last_used + *keep_alive;
        h.expires_wall = std::chrono::system_clock::now() + *keep_alive;
    } else {
        h.expires.reset();
    }
    if (h.users == 0 && keep_alive && keep_alive->count() == 0) {
        for (size_t i = 0; i < hosted_.size(); ++i) {
            if (hosted_[i].get() == &h) {
                unload_locked(i);
                return;
            }
        }
    }
}

int ModelHost::lease_sequence(HostedModel& h, const std::vector<TokenId>& prompt) {
    std::lock_guard lock(mu_);
    int best = -1;
    size_t best_shared = 0;
    for (size_t s = 0; s < h.sessions.size(); ++s) {
        if (h.leased[s]) continue;
        const std::vector<TokenId>& cached = h.sessions[s]->context();
        size_t shared = 0;
        while (shared < cached.size() && shared < prompt.size() && cached[shared] == prompt[shared])
            ++shared;
        if (best < 0 || shared > best_shared ||
            (shared == best_shared && h.sequence_used[s] < h.sequence_used[size_t(best)])) {
            best = int(s);
            best_shared = shared;
        }
    }
    if (best >= 0) h.leased[size_t(best)] = true;
    return best;
}

void ModelHost::return_sequence(HostedModel& h, int seq) {
    std::lock_guard lock(mu_);
    h.leased[size_t(seq)] = false;
    h.sequence_used[size_t(seq)] = SteadyClock::now();
}

void ModelHost::unload(const ModelSpec& m) {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < hosted_.size(); ++i) {
        if (hosted_[i]->served == &m) {
            unload_locked(i);
            return;
        }
    }
}

void ModelHost::unload_locked(size_t index) {
    const StoreReport r = hosted_[index]->model->store->report();
    gone_.bytes_from_disk += r.totals.bytes_from_disk;
    gone_.experts += r.experts;
    gone_.gpu_experts += r.gpu_experts;
    if (const SequenceBatcher* b = hosted_[index]->batcher.get()) add_steps(gone_.batching, *b);
    ++gone_.unloads;
    hosted_.erase(hosted_.begin() + long(index));
}

std::pair<uint64_t, uint64_t> ModelHost::loads_and_unloads() const {
    std::lock_guard lock(mu_);
    return {gone_.loads, gone_.unloads};
}

HostTotals ModelHost::totals() const {
    std::lock_guard lock(mu_);
    HostTotals t = gone_;
    for (const auto& h : hosted_) {
        const StoreReport r = h->model->store->report();
        t.bytes_from_disk += r.totals.bytes_from_disk;
        t.experts += r.experts;
        t.gpu_experts += r.gpu_experts;
        if (const SequenceBatcher* b = h->batcher.get()) add_steps(t.batching, *b);
    }
    return t;
}

std::optional<SteadyClock::time_point> ModelHost::expire() {
    std::lock_guard lock(mu_);
    const auto now = SteadyClock::now();
    std::optional<SteadyClock::time_point> next;
    for (size_t i = hosted_.size(); i-- > 0;) {
        const auto& e = hosted_[i]->expires;
        if (!e || hosted_[i]->users > 0) continue;
        if (*e <= now) {
            unload_locked(i);
        } else if (!next || *e < *next) {
            next = *e;
        }
    }
    return next;
}

std::vector<LoadedModelStatus> ModelHost::loaded_models() const {
    std::lock_guard lock(mu_);
    std::vector<LoadedModelStatus> out;
    for (const auto& h : hosted_) {
        LoadedModelStatus s{h->served, h->model->loaded_bytes, 0, h->model->engine->n_ctx(),
                            std::nullopt};
        if (h->expires) s.expires = h->expires_wall;
        out.push_back(s);
    }
    return out;
}

}  // namespace strata
