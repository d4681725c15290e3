#include "server/model_host.h"

#include <algorithm>

namespace strata::server {

namespace {
using SteadyClock = std::chrono::steady_clock;

// What a model will hold in RAM: what its plan counts for it (weights, caches, slots, KV cache,
// the engine's activations, I/O buffers; not the process, which every plan counts once more);
// without a plan, the whole file, at most the budget.
uint64_t ram_estimate(const ServedModelInfo& m, uint64_t budget) {
    if (m.plan) return m.plan->memory.model();
    return budget ? std::min(m.file_bytes, budget) : m.file_bytes;
}

// What the process holds whatever is loaded, as the plans count it (the same in each).
uint64_t process_estimate(const ServedModelInfo& m) {
    return m.plan ? m.plan->memory.process() : 0;
}
}  // namespace

ModelHost::ModelHost(ModelLoadOptions options, uint64_t ram_budget)
    : options_(std::move(options)), ram_budget_(ram_budget) {}

bool ModelHost::is_loaded(const ServedModelInfo& m) const {
    std::lock_guard lock(mu_);
    return std::any_of(hosted_.begin(), hosted_.end(),
                       [&](const auto& h) { return h->served == &m; });
}

Result<HostedModel*> ModelHost::acquire(const ServedModelInfo& m, double& load_seconds) {
    load_seconds = 0;
    {
        std::lock_guard lock(mu_);
        for (auto& h : hosted_) {
            if (h->served == &m) {
                h->last_used = SteadyClock::now();
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
            while (!hosted_.empty() && used() + need > ram_budget_) {
                size_t lru = 0;
                for (size_t i = 1; i < hosted_.size(); ++i) {
                    if (hosted_[i]->last_used < hosted_[lru]->last_used) lru = i;
                }
                unload_locked(lru);
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
    h->session = std::make_unique<GenerationSession>(*h->model->engine, h->model->tokenizer);
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
    if (keep_alive) {
        h.expires = h.last_used + *keep_alive;
        h.expires_wall = std::chrono::system_clock::now() + *keep_alive;
    } else {
        h.expires.reset();
    }
}

void ModelHost::unload(const ServedModelInfo& m) {
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
    }
    return t;
}

std::optional<SteadyClock::time_point> ModelHost::expire() {
    std::lock_guard lock(mu_);
    const auto now = SteadyClock::now();
    std::optional<SteadyClock::time_point> next;
    for (size_t i = hosted_.size(); i-- > 0;) {
        const auto& e = hosted_[i]->expires;
        if (!e) continue;
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

}  // namespace strata::server
