#include "model/model_info.h"

#include <limits>

#include "model/tensor_validation.h"
#include "util/units.h"

namespace strata {

void ByteTotals::add(uint64_t n_params, uint64_t n_bytes, double reads, bool expert) {
    tensors += 1;
    params += n_params;
    bytes += n_bytes;
    if (expert) expert_bytes += n_bytes;
    bytes_per_token += static_cast<double>(n_bytes) * reads;
}

std::optional<uint32_t> ModelInfo::file_type() const {
    auto v = file.get_uint("general.file_type");
    if (!v || *v > std::numeric_limits<uint32_t>::max()) return std::nullopt;
    return static_cast<uint32_t>(*v);
}

namespace {

// The fraction of routed experts one token uses. Taken from the hparams; for a file whose
// hparams could not be loaded, from the raw keys; without either, every expert is assumed to be
// read (an upper bound).
double expert_read_fraction(const ModelInfo& m) {
    if (m.hparams) {
        if (!m.hparams->is_moe()) return 1.0;
        return static_cast<double>(m.hparams->n_expert_used) / m.hparams->n_expert;
    }
    if (m.arch.empty()) return 1.0;
    const auto n = m.file.get_uint(m.arch + ".expert_count");
    const auto used = m.file.get_uint(m.arch + ".expert_used_count");
    if (n && used && *n > 0 && *used > 0 && *used <= *n) {
        return static_cast<double>(*used) / static_cast<double>(*n);
    }
    return 1.0;
}

ModelTensor describe_tensor(const TensorInfo& t, size_t index, double expert_fraction,
                            bool tied_output) {
    ModelTensor mt;
    mt.index = index;
    const TensorName n = classify_tensor_name(t.name);
    mt.role = n.role;
    mt.layer = n.layer;
    mt.expert = n.expert;
    mt.is_bias = n.is_bias;
    if (is_expert_role(n.role) && !n.is_bias) {
        mt.reads_per_token = expert_fraction;
        // Fused layout: the last dimension counts experts, each a contiguous run of rows.
        if (n.expert < 0 && t.n_dims >= 2 && t.shape[t.n_dims - 1] > 0) {
            const uint64_t count = t.shape[t.n_dims - 1];
            if (count <= std::numeric_limits<uint32_t>::max() && t.n_bytes % count == 0) {
                mt.n_expert_slices = static_cast<uint32_t>(count);
                mt.expert_slice_bytes = t.n_bytes / count;
            }
        }
    } else if (n.role == TensorRole::TokenEmbedding && !tied_output && t.n_dims == 2 &&
               t.shape[1] > 0) {
        mt.reads_per_token = 1.0 / static_cast<double>(t.shape[1]);
    }
    return mt;
}

void add_totals(ModelInfo& m) {
    for (const ModelTensor& mt : m.tensors) {
        const TensorInfo& t = m.info(mt);
        const uint64_t params = t.n_elements();
        const bool expert = mt.is_routed_expert();
        m.totals.add(params, t.n_bytes, mt.reads_per_token, expert);
        m.by_role[mt.role].add(params, t.n_bytes, mt.reads_per_token, expert);
        m.by_type[t.type].add(params, t.n_bytes, mt.reads_per_token, expert);
        if (mt.layer < 0) {
            m.non_layer.add(params, t.n_bytes, mt.reads_per_token, expert);
        } else {
            m.by_layer[mt.layer].add(params, t.n_bytes, mt.reads_per_token, expert);
        }
    }
}

// Moves the multi-token-prediction blocks' tensors (layers n_layer and up) out of the file's list.
void set_aside_nextn_blocks(ModelInfo& m) {
    const int n_layer = static_cast<int>(m.hparams->n_layer);
    std::vector<TensorInfo> kept;
    kept.reserve(m.file.tensors.size());
    for (TensorInfo& t : m.file.tensors) {
        if (classify_tensor_name(t.name).layer >= n_layer) {
            m.set_aside_totals.add(t.n_elements(), t.n_bytes, 0.0, false);
            m.set_aside.push_back(std::move(t));
        } else {
            kept.push_back(std::move(t));
        }
    }
    m.file.tensors = std::move(kept);
    m.file.reindex();
    const uint32_t n = m.hparams->n_layer_nextn;
    m.warnings.push_back(std::to_string(n) + " multi-token-prediction layer" + (n == 1 ? "" : "s") +
                         " (" + format_bytes(m.set_aside_totals.bytes) + ", " +
                         std::to_string(m.set_aside.size()) + " tensors) " +
                         (n == 1 ? "is" : "are") + " not used: strata runs the " +
                         std::to_string(m.hparams->n_layer) + " layers of the trunk");
}

}  // namespace

ModelInfo describe_model(GgufFile file) {
    ModelInfo m;
    m.file = std::move(file);
    if (auto arch = m.file.get_string("general.architecture")) m.arch = *arch;

    auto hp = load_hparams(m.file);
    if (hp) {
        m.hparams = std::move(*hp);
    } else {
        m.problems.push_back(hp.error().message);
    }
    if (m.vocab_only()) {
        m.problems.push_back(m.file.path +
                             ": the file has no tensors (a vocabulary-only file): it can be used "
                             "for tokenization but not run");
    } else if (m.hparams) {
        TensorCheck check = check_tensors(m.file, *m.hparams);
        for (auto& e : check.errors) m.problems.push_back(std::move(e));
        for (auto& w : check.warnings) m.warnings.push_back(std::move(w));
    }

    if (m.hparams && m.hparams->n_layer_nextn > 0) set_aside_nextn_blocks(m);

    const double expert_fraction = expert_read_fraction(m);
    const bool tied_output = m.file.find_tensor("output.weight") == nullptr;
    m.tensors.reserve(m.file.tensors.size());
    for (size_t i = 0; i < m.file.tensors.size(); ++i) {
        m.tensors.push_back(describe_tensor(m.file.tensors[i], i, expert_fraction, tied_output));
    }
    const int n_layer = m.hparams ? static_cast<int>(m.hparams->n_layer) : 0;
    for (int il = 0; il < n_layer; ++il) m.by_layer[il] = ByteTotals{};
    add_totals(m);
    return m;
}

Result<ModelInfo> load_model_info(GgufFile file) {
    ModelInfo m = describe_model(std::move(file));
    if (m.runnable()) return m;
    constexpr size_t kShown = 5;
    std::string msg;
    for (size_t i = 0; i < m.problems.size() && i < kShown; ++i) {
        if (i) msg += "\n";
        msg += m.problems[i];
    }
    if (m.problems.size() > kShown) {
        msg += "\n(and " + std::to_string(m.problems.size() - kShown) + " more problems)";
    }
    return Error{std::move(msg)};
}

std::vector<ExpertSlice> expert_slices(const ModelInfo& info, const ModelTensor& t) {
    std::vector<ExpertSlice> out;
    out.reserve(t.n_expert_slices);
    const uint64_t base = info.info(t).offset;
    for (uint32_t e = 0; e < t.n_expert_slices; ++e) {
        out.push_back({e, base + e * t.expert_slice_bytes, t.expert_slice_bytes});
    }
    return out;
}

}  // namespace strata
