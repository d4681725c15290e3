#include "synth/generator.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>

#include "gguf/writer.h"
#include "synth/row_encoder.h"
#include "synth/weight_init.h"
#include "util/units.h"
#include "util/worker_pool.h"

namespace strata {

namespace {

// Floats generated per encode call inside a chunk: a few hundred KiB stays in L2.
constexpr size_t kBatchFloats = 64 * 1024;

std::string arch_key(const ModelHparams& hp, const char* suffix) {
    return hp.arch + "." + suffix;
}

// One tensor's generation parameters, resolved once.
struct TensorJob {
    const TensorSpec* spec = nullptr;
    WeightInit init;
    uint64_t key = 0;
    RowEncoder encoder;
    uint64_t row_bytes = 0;
};

// A run of whole rows of one tensor, filled by one worker into one buffer.
struct Chunk {
    size_t tensor = 0;
    uint64_t first_row = 0, n_rows = 0;
};

// Splits the tensors, in file order, into chunks of at most chunk_bytes (at least one row).
class ChunkCursor {
  public:
    ChunkCursor(const std::vector<TensorJob>& jobs, uint64_t chunk_bytes)
        : jobs_(jobs), chunk_bytes_(chunk_bytes) {}

    std::optional<Chunk> next() {
        while (tensor_ < jobs_.size() && row_ >= jobs_[tensor_].spec->n_rows()) {
            ++tensor_;
            row_ = 0;
        }
        if (tensor_ >= jobs_.size()) return std::nullopt;
        const TensorJob& j = jobs_[tensor_];
        const uint64_t rows_per_chunk = std::max<uint64_t>(1, chunk_bytes_ / j.row_bytes);
        Chunk c{tensor_, row_, std::min(rows_per_chunk, j.spec->n_rows() - row_)};
        row_ += c.n_rows;
        return c;
    }

  private:
    const std::vector<TensorJob>& jobs_;
    uint64_t chunk_bytes_;
    size_t tensor_ = 0;
    uint64_t row_ = 0;
};

void fill_chunk(const TensorJob& job, const Chunk& c, std::vector<uint8_t>& out) {
    thread_local std::vector<float> scratch;
    const uint64_t row_len = job.spec->row_length();
    const uint64_t rows_per_batch = std::max<uint64_t>(1, kBatchFloats / row_len);
    scratch.resize(static_cast<size_t>(std::min(rows_per_batch, c.n_rows) * row_len));
    out.resize(static_cast<size_t>(c.n_rows * job.row_bytes));
    for (uint64_t r = 0; r < c.n_rows; r += rows_per_batch) {
        const uint64_t nr = std::min(rows_per_batch, c.n_rows - r);
        generate_values(job.init, job.key, (c.first_row + r) * row_len,
                        static_cast<size_t>(nr * row_len), row_len, scratch.data());
        job.encoder.encode(scratch.data(), out.data() + r * job.row_bytes, static_cast<size_t>(nr),
                           static_cast<size_t>(row_len));
    }
}

Result<void> check_free_space(const std::string& path, uint64_t needed) {
    namespace fs = std::filesystem;
    fs::path dir = fs::path(path).parent_path();
    if (dir.empty()) dir = ".";
    std::error_code ec;
    const fs::space_info space = fs::space(dir, ec);
    if (ec) return {};  // the writer reports a missing or unusable directory with its own error
    if (space.available < needed) {
        return err(path, ": the model needs ", format_bytes(needed, true), " but only ",
                   format_bytes(space.available, true), " are free in ", dir.string());
    }
    return {};
}

// Streams every tensor's bytes into the opened writer.
Result<void> write_weights(const SynthConfig& config, const SynthPlan& plan, GgufWriter& writer,
                           const SynthProgress& progress) {
    if (plan.layout.empty()) return {};
    std::vector<TensorJob> jobs(plan.layout.size());
    for (size_t i = 0; i < plan.layout.size(); ++i) {
        const TensorSpec& spec = plan.layout[i];
        TensorJob& j = jobs[i];
        j.spec = &spec;
        j.init = weight_init(spec, plan.hparams);
        j.key = tensor_stream_key(config.seed, spec.name);
        j.encoder = *row_encoder_for(plan.types[i]);  // checked by plan_synthetic_model
        j.row_bytes = writer.tensors()[i].row_bytes();
    }

    const unsigned n_threads =
        config.threads != 0 ? config.threads : WorkerPool::default_thread_count();
    const size_t window = n_threads + 2;  // chunks in flight: one per worker, plus slack
    // Declared before the pool: the pool's destructor finishes queued jobs that use these.
    std::vector<std::vector<uint8_t>> buffers(window);
    std::vector<char> slot_done(window, 0);
    std::mutex mutex;
    std::condition_variable filled;
    ChunkCursor cursor(jobs, config.chunk_bytes);
    size_t submitted = 0, written = 0;
    WorkerPool pool(n_threads);

    auto submit_next = [&]() -> bool {
        std::optional<Chunk> c = cursor.next();
        if (!c) return false;
        const size_t slot = submitted++ % window;
        {
            std::lock_guard lock(mutex);
            slot_done[slot] = 0;
        }
        pool.submit([&, slot, chunk = *c] {
            fill_chunk(jobs[chunk.tensor], chunk, buffers[slot]);
            {
                std::lock_guard lock(mutex);
                slot_done[slot] = 1;
            }
            filled.notify_all();
        });
        return true;
    };

    while (submitted < window && submit_next()) {
    }
    // Progress counts the header as done; padding between tensors (< alignment) is not counted.
    const uint64_t total = writer.file_size();
    const TensorInfo& last = writer.tensors().back();
    uint64_t bytes_done = total - std::min(total, last.offset + last.n_bytes);
    while (written < submitted) {
        const size_t slot = written % window;
        {
            std::unique_lock lock(mutex);
            filled.wait(lock, [&] { return slot_done[slot] != 0; });
        }
        STRATA_TRY(writer.write(buffers[slot].data(), buffers[slot].size()));
        bytes_done += buffers[slot].size();
        ++written;
        submit_next();  // reuses this slot once the window wraps around
        if (progress) progress(std::min(bytes_done, total), total);
    }
    return {};
}

}  // namespace

std::vector<MetadataEntry> model_metadata(const ModelHparams& hp, uint32_t file_type,
                                          uint64_t seed) {
    const ArchTraits* traits = find_arch_traits(hp.arch);
    std::vector<MetadataEntry> m;
    auto put = [&](const char* suffix, Value v) {
        m.push_back({arch_key(hp, suffix), std::move(v)});
    };
    m.push_back({"general.architecture", hp.arch});
    m.push_back({"general.name", hp.name.empty() ? "synthetic-" + hp.arch : hp.name});
    m.push_back({"general.description", "Synthetic model with seeded random weights (seed " +
                                            std::to_string(seed) + "); it is not trained."});
    put("vocab_size", hp.n_vocab);
    put("context_length", hp.n_ctx_train);
    put("embedding_length", hp.n_embd);
    // As the reference converter writes them: block_count counts the multi-token-prediction
    // blocks stored after the trunk.
    put("block_count", hp.n_layer + hp.n_layer_nextn);
    if (hp.n_layer_nextn > 0) put("nextn_predict_layers", hp.n_layer_nextn);
    if (hp.n_ff > 0) put("feed_forward_length", hp.n_ff);
    put("attention.head_count", hp.n_head);
    put("attention.head_count_kv", hp.n_head_kv);
    if (hp.is_mla()) {
        // As the current converter writes them: the cache's view in key/value_length, the heads'
        // in the _mla keys (earlier files: the heads' in key/value_length, with attn_kv_b).
        if (hp.n_lora_q > 0) put("attention.q_lora_rank", hp.n_lora_q);
        put("attention.kv_lora_rank", hp.n_lora_kv);
        put("attention.key_length", hp.mla_kv_b ? hp.head_dim_k : hp.mla_cache_width());
        put("attention.value_length", hp.mla_kv_b ? hp.head_dim_v : hp.n_lora_kv);
        if (!hp.mla_kv_b) {
            put("attention.key_length_mla", hp.head_dim_k);
            put("attention.value_length_mla", hp.head_dim_v);
        }
    } else if (hp.head_dim_k != hp.n_embd / hp.n_head || hp.head_dim_v != hp.head_dim_k) {
        put("attention.key_length", hp.head_dim_k);
        put("attention.value_length", hp.head_dim_v);
    }
    put("rope.dimension_count", hp.n_rot);
    put("rope.freq_base", hp.rope_freq_base);
    if (hp.rope_scaling.type != "none") {
        put("rope.scaling.type", hp.rope_scaling.type);
        put("rope.scaling.factor", hp.rope_scaling.factor);
        if (hp.rope_scaling.original_context > 0) {
            put("rope.scaling.original_context_length", hp.rope_scaling.original_context);
        }
        // The converter writes DeepSeek's mscale_all_dim times 0.1.
        if (hp.rope_scaling.mscale_all_dim != 0.0f) {
            put("rope.scaling.yarn_log_multiplier", 0.1f * hp.rope_scaling.mscale_all_dim);
        }
    }
    if (hp.n_swa > 0) put("attention.sliding_window", hp.n_swa);
    put("attention.layer_norm_rms_epsilon", hp.rms_eps);
    if (hp.has_recurrent()) {
        put("ssm.conv_kernel", hp.ssm_d_conv);
        put("ssm.state_size", hp.ssm_d_state);
        put("ssm.group_count", hp.ssm_n_group);
        put("ssm.time_step_rank", hp.ssm_dt_rank);
        put("ssm.inner_size", uint32_t(hp.ssm_value_dim()));
        put("full_attention_interval", uint32_t{4});
        if (traits && traits->rope_sections) {
            Array sections{ValueType::I32, {}};
            for (uint32_t x : hp.rope_sections) sections.items.emplace_back(int32_t(x));
            put("rope.dimension_sections", std::move(sections));
        }
    }
    if (hp.is_moe()) {
        put("expert_count", hp.n_expert);
        put("expert_used_count", hp.n_expert_used);
        // Mixtral-layout llama files carry the expert width in feed_forward_length only.
        if (!(traits && traits->expert_width_default == ExpertWidthDefault::FfnLength)) {
            put("expert_feed_forward_length", hp.n_ff_exp);
        }
        if (hp.n_ff_shexp > 0) put("expert_shared_feed_forward_length", hp.n_ff_shexp);
        if (hp.n_leading_dense > 0) put("leading_dense_block_count", hp.n_leading_dense);
        if (traits && (traits->selection_bias || traits->shared_width_from_experts)) {
            // The deepseek-style routing keys, as the reference converter writes them.
            put("expert_shared_count", hp.n_expert_shared);
            put("expert_gating_func", uint32_t(hp.expert_gating == ExpertGating::Sigmoid ? 2 : 1));
            put("expert_weights_scale", hp.expert_weights_scale);
            put("expert_weights_norm", hp.norm_topk_prob);
            if (hp.grouped_routing()) {
                put("expert_group_count", hp.n_expert_group);
                put("expert_group_used_count", hp.n_expert_group_used);
            }
        }
    }
    m.push_back({"general.file_type", file_type});
    m.push_back({"general.quantization_version", uint32_t{2}});
    return m;
}

Result<SynthPlan> plan_synthetic_model(const SynthConfig& config) {
    STRATA_TRY(validate_synth_shape(config.hparams));
    const std::optional<RowEncoder> weights_encoder = row_encoder_for(config.weights.base);
    const std::optional<uint32_t> file_type = file_type_for(config.weights);
    if (!weights_encoder || !file_type) {
        std::string known;
        for (const std::string& name : weight_format_names()) {
            known += (known.empty() ? "" : ", ") + name;
        }
        return err("--type ", weight_format_name(config.weights),
                   ": synth cannot write this type (it writes ", known, ")");
    }

    SynthVocabulary vocab;
    if (config.vocab_from.empty()) {
        vocab = builtin_vocabulary();
    } else {
        STRATA_ASSIGN(vocab, vocabulary_from_gguf(config.vocab_from));
    }

    SynthPlan plan;
    plan.hparams = config.hparams;
    plan.hparams.n_vocab = vocab.n_tokens;
    plan.hparams = with_layout_defaults(plan.hparams);
    plan.layout = tensor_layout(plan.hparams);
    for (const TensorSpec& t : plan.layout) {
        const TensorType type = synth_tensor_type(t, config.weights, plan.hparams);
        const auto info = tensor_type_info(type);
        if (!row_encoder_for(type) || !info) {
            return err(t.name, ": synth cannot write type ", std::string(tensor_type_name(type)));
        }
        if (t.row_length() % info->block_size != 0) {
            return err(t.name, ": row length ", std::to_string(t.row_length()),
                       " is not a multiple of the ", std::string(info->name), " block size ",
                       std::to_string(info->block_size),
                       "; choose sizes that are, or a mix such as Q4_K_M that falls back to a "
                       "type that fits");
        }
        plan.types.push_back(type);
    }
    plan.metadata = model_metadata(plan.hparams, *file_type, config.seed);
    if (!config.chat_template.empty()) {
        std::erase_if(vocab.entries,
                      [](const MetadataEntry& e) { return e.key == "tokenizer.chat_template"; });
        vocab.entries.push_back({"tokenizer.chat_template", config.chat_template});
    }
    plan.metadata.insert(plan.metadata.end(), vocab.entries.begin(), vocab.entries.end());
    plan.vocab_source = vocab.source;
    return plan;
}

Result<SynthResult> write_synthetic_model(const SynthConfig& config, const std::string& path,
                                          bool overwrite, const SynthProgress& progress) {
    STRATA_ASSIGN(SynthPlan plan, plan_synthetic_model(config));
    return write_synthetic_model(config, plan, path, overwrite, progress);
}

Result<SynthResult> write_synthetic_model(const SynthConfig& config, const SynthPlan& plan,
                                          const std::string& path, bool overwrite,
                                          const SynthProgress& progress) {
    GgufWriter writer;
    for (const auto& e : plan.metadata) writer.set(e.key, e.value);
    for (size_t i = 0; i < plan.layout.size(); ++i) {
        STRATA_TRY(writer.add_tensor(plan.layout[i].name, plan.types[i], plan.layout[i].shape));
    }
    STRATA_TRY(check_free_space(path, writer.file_size()));

    const auto start = std::chrono::steady_clock::now();
    writer.set_direct_io(true);  // tens of GB: no page-cache copies, nothing left cached
    STRATA_TRY(writer.open(path, overwrite));
    STRATA_TRY(write_weights(config, plan, writer, progress));
    STRATA_TRY(writer.finish());

    SynthResult r;
    r.path = path;
    r.file_bytes = writer.file_size();
    r.n_tensors = plan.layout.size();
    r.n_parameters = layout_parameter_count(plan.layout);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
}

}  // namespace strata
