// Rendering a Plan as text for `strata inspect` (see plan_text.h).
#include "plan/plan_text.h"

#include <cstdio>
#include <iterator>
#include <vector>

#include "util/table.h"
#include "util/units.h"

namespace strata {

namespace {

std::string fmt(const char* format, double x) {
    char buf[64];
    std::snprintf(buf, sizeof buf, format, x);
    return buf;
}

std::string rate(double bytes_per_second) {
    if (bytes_per_second <= 0) return "-";
    return format_bytes(static_cast<uint64_t>(bytes_per_second), /*decimal=*/true) + "/s";
}

std::string seconds(double s) {
    if (s <= 0) return "0";
    if (s < 1e-3) return fmt("%.1f µs", s * 1e6);
    if (s < 1) return fmt("%.1f ms", s * 1e3);
    return fmt("%.2f s", s);
}

std::string memory_line(const MemoryPlan& m, const StreamPlan& s) {
    std::string line = "resident " + format_bytes(m.resident_weights);
    if (m.cached_weights) line += " + cached FFN " + format_bytes(m.cached_weights);
    if (m.expert_cache) line += " + expert cache " + format_bytes(m.expert_cache);
    if (m.slots) {
        line += " + slots " + std::to_string(s.slots) + " × " + format_bytes(s.slot_bytes);
    }
    if (m.row_buffers) line += " + row buffers " + format_bytes(m.row_buffers);
    line += " + KV " + format_bytes(m.kv_cache) + " + engine " + format_bytes(m.activations) +
            " + I/O " + format_bytes(m.io_buffers) + " + process " + format_bytes(m.baseline) +
            " + slack " + format_bytes(m.slack) + " = " + format_bytes(m.total) + " of " +
            format_bytes(m.budget);
    return line;
}

std::string engine_line(const Plan& p) {
    return format_bytes(p.memory.activations) + " for batches of " + std::to_string(p.batch) +
           " tokens on " + std::to_string(p.threads) +
           " threads (activations, attention scratch, " +
           (p.gpu_device >= 0 ? "logits, the GPU's pinned staging and the CUDA runtime)"
                              : "logits)");
}

std::string process_line(const MemoryPlan& m) {
    return format_bytes(m.baseline) + " before the weights are read (" +
           (m.baseline_measured ? "measured" : "estimated") +
           ": code, libraries, the model's metadata and tokenizer); I/O buffers " +
           format_bytes(m.io_buffers) + "; slack " + format_bytes(m.slack) +
           " (allocator, page tables)";
}

std::string streaming_line(const Plan& p) {
    const StreamPlan& s = p.stream;
    if (p.mode == PlanMode::Resident) return "none: nothing is read from disk after loading";
    std::string line;
    if (p.mode == PlanMode::FfnStream) {
        line = std::to_string(s.streamed_layers) + " of " +
               std::to_string(s.streamed_layers + s.cached_layers) +
               (p.deep.whole_layers ? " whole layers streamed, " : " FFN layers streamed, ") +
               std::to_string(s.cached_layers) + " cached";
        if (p.deep.embedding_rows || p.deep.head_rows) {
            line += p.deep.head_rows ? "; embedding and LM head read by rows"
                                     : "; embedding read by rows";
        }
        if (s.slots == 0) return line;
    } else {
        const ExpertCachePlan& c = p.expert_cache;
        line = "expert cache " + std::to_string(c.capacity) + " of " + std::to_string(c.experts) +
               " experts (" + format_bytes(c.expert_bytes) + " each), predicted hit rate " +
               fmt("%.1f%%", 100 * c.hit_rate);
    }
    line += "; " + std::to_string(s.slots) + " slots of " + format_bytes(s.slot_bytes) +
            (s.slots_forced ? " (forced)" : "") + "; lookahead " + std::to_string(s.lookahead) +
            (s.lookahead_forced ? " (forced)" : "");
    if (s.layer_read_seconds > 0) {
        line += " (longest compute gap " + seconds(s.longest_gap_seconds) + ", layer read " +
                seconds(s.layer_read_seconds) + ")";
    }
    return line;
}

std::string budget_line(const Plan& p) {
    std::string line = format_bytes(p.budgets.ram) + " RAM" +
                       (p.budgets.ram_from_flag ? " (--ram)" : " (available minus 4 GiB)");
    line += "; GPU " + (p.budgets.gpu_mem ? format_bytes(p.budgets.gpu_mem) : std::string("none"));
    if (p.budgets.gpu_from_flag) line += " (--gpu-mem)";
    return line;
}

// Where a layer's weights lie and who computes them; in a split that ships RAM's weights for
// prompt batches (prompt_staging), prompts compute the CPU's part on the GPU.
std::string where(const Plan& p, const LayerPlan& l) {
    const bool ships = p.gpu_split() && p.gpu_memory.prompt_staging > 0;
    if (l.on_gpu && l.experts_on_cpu) {
        return l.ffn_use == TensorUse::Streamed ? "gpu, experts disk (expert cache, cpu)"
               : ships ? "gpu, experts ram (cpu; prompts: shipped to the gpu)"
                       : "gpu, experts ram (cpu)";
    }
    if (l.on_gpu) return "gpu";
    if (l.ffn_bytes == 0) return "-";
    switch (l.ffn_use) {
        case TensorUse::Resident:
            return !p.gpu_split() ? "ram"
                   : ships        ? "ram (cpu; prompts: matrices shipped to the gpu)"
                                  : "ram (cpu)";
        case TensorUse::Cached:
            return "ram (cached)";
        case TensorUse::Streamed:
            return p.mode == PlanMode::ExpertStream ? "disk (expert cache)"
                   : ships ? "disk (streamed; cpu; prompts: shipped to the gpu)"
                           : "disk (streamed)";
    }
    return "?";
}

std::string layer_table(const Plan& p) {
    const bool experts = p.mode == PlanMode::ExpertStream ||
                         (p.mode == PlanMode::Resident && p.expert_cache.experts > 0);
    TextTable t({{"layer"},
                 {"resident", Align::Right},
                 {experts ? "experts" : "ffn", Align::Right},
                 {"where"}});
    bool merged = false;
    for (auto it = p.layers.begin(); it != p.layers.end();) {
        auto last = it, next = std::next(it);
        while (next != p.layers.end() && next->resident_bytes == it->resident_bytes &&
               next->ffn_bytes == it->ffn_bytes && next->ffn_use == it->ffn_use &&
               next->on_gpu == it->on_gpu && next->experts_on_cpu == it->experts_on_cpu) {
            last = next++;
        }
        merged = merged || last != it;
        const std::string label =
            last == it ? std::to_string(it->layer)
                       : std::to_string(it->layer) + "-" + std::to_string(last->layer);
        t.add_row(
            {label, format_bytes(it->resident_bytes), format_bytes(it->ffn_bytes), where(p, *it)});
        it = next;
    }
    return std::string("\nplan by layer") +
           (merged ? " (identical neighbours merged, figures per layer)" : "") + "\n" +
           t.render("  ");
}

// The CPU kernels the plan's products take per weight type and phase (backend/kernel_choice.h).
std::string cpu_kernels_text(const CpuKernelTable& k) {
    if (k.empty()) {
        const std::string widest = k.widest == CpuPathChoice::Best
                                       ? std::string("the widest path the CPU runs")
                                       : std::string(tuning_name(k.widest));
        return "\ncpu kernels: " + widest + " for every type (no measured table)\n";
    }
    return "\ncpu kernels (measured; --tune cpu_path=avx2|avx512 forces one path)\n" +
           kernel_table_text(k, "  ");
}

}  // namespace

std::string plan_text(const Plan& p) {
    std::string out = "\nplan\n";
    TextTable kv({{""}, {""}});
    kv.add_row({"mode", std::string(plan_mode_name(p.mode)) + ": " + p.reason});
    kv.add_row({"budget", budget_line(p)});
    if (p.gpu_device >= 0) {
        const GpuMemoryPlan& g = p.gpu_memory;
        std::string layers;
        if (p.gpu_split()) {
            layers = std::to_string(p.gpu_layers) + " of " + std::to_string(p.layers.size()) +
                     " layers" +
                     (p.cpu_expert_layers
                          ? " (the routed experts of " + std::to_string(p.cpu_expert_layers) +
                                (p.mode == PlanMode::ExpertStream ? " on disk)" : " in RAM)")
                          : std::string()) +
                     ", ";
        }
        kv.add_row(
            {"gpu",
             "GPU " + std::to_string(p.gpu_device) + ": " + layers + "weights " +
                 format_bytes(g.weights) + ", KV cache " + format_bytes(g.kv_cache) + ", buffers " +
                 format_bytes(g.activations) +
                 (g.prompt_staging ? ", prompt staging " + format_bytes(g.prompt_staging)
                                   : std::string()) +
                 (g.expert_entries ? ", expert cache " + format_bytes(g.expert_cache) + " (" +
                                         std::to_string(g.expert_entries) + " experts, " +
                                         fmt("%.1f", 100 * g.expert_hit_rate) + "% of the CPU's)"
                                   : std::string()) +
                 ": " + format_bytes(g.total) + " of " + format_bytes(g.budget)});
    }
    kv.add_row({"memory", memory_line(p.memory, p.stream)});
    kv.add_row({"engine", engine_line(p)});
    kv.add_row({"process", process_line(p.memory)});
    const std::string seqs =
        p.n_seq > 1 ? std::to_string(p.n_seq) + " sequences of " : std::string();
    const std::string kv_where = p.gpu_device < 0
                                     ? format_bytes(p.memory.kv_cache)
                                     : format_bytes(p.memory.kv_cache) + " in RAM and " +
                                           format_bytes(p.gpu_memory.kv_cache) + " on the GPU";
    // A hybrid model's recurrent state is part of it (in RAM and on the GPU), the same size
    // whatever the context.
    const uint64_t recurrent = p.memory.recurrent_state + p.gpu_memory.recurrent_state;
    const std::string state = recurrent > 0
                                  ? ", with the recurrent state (" + format_bytes(recurrent) + ")"
                                  : std::string();
    kv.add_row({"kv cache", kv_where + " for " + seqs + std::to_string(p.n_ctx) + " tokens (" +
                                std::string(kv_type_name(p.kv_type)) + ")" + state});
    kv.add_row({"streaming", streaming_line(p)});
    kv.add_row({"speed limit", fmt("%.2f", p.tokens_per_second) + " tokens/s, bound by " +
                                   std::string(tier_name(p.bound))});
    if (p.prompt_tokens_per_second > 0) {
        kv.add_row({"prompt limit", fmt("%.0f", p.prompt_tokens_per_second) +
                                        " tokens/s in batches of " + std::to_string(p.batch) +
                                        (p.prompt_bound == Tier::Disk
                                             ? ", bound by reading the streamed weights from disk"
                                             : ", bound by shipping RAM's weights to the GPU")});
    }
    out += kv.render("  ");

    TextTable t({{"tier"},
                 {"stored", Align::Right},
                 {"read per token", Align::Right},
                 {"bandwidth", Align::Right},
                 {"time per token", Align::Right},
                 {"bandwidth from"}});
    for (const TierTraffic& x : p.tiers) {
        t.add_row({std::string(tier_name(x.tier)), format_bytes(x.stored_bytes),
                   format_bytes(static_cast<uint64_t>(x.bytes_per_token)), rate(x.bandwidth),
                   seconds(x.seconds_per_token), x.bandwidth_source});
    }
    out += "\nplan by tier\n" + t.render("  ");
    out += cpu_kernels_text(p.cpu_kernels);
    out += layer_table(p);
    for (const std::string& n : p.notes) out += "note: " + n + "\n";
    return out;
}

}  // namespace strata
