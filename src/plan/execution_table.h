// Where every operation of a forward pass runs: the plan's placement turned into the table the
// engine walks.
//
// The plan decides where each tensor lives (plan.h); this says, per layer and for decode and
// prompt batches, which processor computes each block and where its weights come from. The
// engine runs exactly this table: it creates one backend per compute unit, hands the hidden
// state over where consecutive blocks run on different units, and stages weights onto the unit
// that computes them when a prompt batch is large enough to pay for the crossing. Nothing in the
// engine chooses a processor by itself.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/hparams.h"
#include "util/result.h"

namespace strata {

struct Plan;
struct ModelInfo;

// A processor the engine computes on, with what the plan gave it beyond its layers.
struct ComputeUnit {
    enum class Kind : uint8_t { Cpu, Gpu };
    Kind kind = Kind::Cpu;
    int device = 0;  // the GPU, for Gpu
    // Room for the weights a prompt batch stages here from host RAM (one layer's, the largest):
    // a layer's matrices or its router and routed experts; 0: nothing is staged here.
    uint64_t staging_bytes = 0;
    // The GPU level of the expert cache: entries of one routed expert each (0: none).
    uint32_t expert_entries = 0;
    uint64_t expert_entry_bytes = 0;

    bool operator==(const ComputeUnit&) const = default;
};
const char* compute_unit_name(ComputeUnit::Kind kind);

// What a prompt batch of a layer computes elsewhere than decode does.
enum class PromptStaging : uint8_t {
    None,
    // The layer's projections and FFN matrices are staged onto `staged_on` and computed there;
    // norms, rope, attention and the KV cache stay on the layer's unit (a dense layer split).
    Matrices,
    // The layer's router and routed experts are staged onto `staged_on` and routed and computed
    // there (an expert split whose experts wait in RAM).
    Experts,
};

struct LayerExecution {
    uint8_t unit = 0;          // norms, attention and its KV cache, dense FFN, shared expert
    uint8_t experts_unit = 0;  // routed experts (and their router) when nothing is staged
    PromptStaging prompt = PromptStaging::None;
    uint8_t staged_on = 0;           // the unit that takes the staged work
    uint32_t prompt_min_tokens = 0;  // batches of at least this many tokens stage
    // The GPU level of the expert cache (on ExecutionTable::expert_level_unit) serves some of
    // this layer's routed experts: those it holds are computed there, beside experts_unit.
    bool expert_level = false;

    bool operator==(const LayerExecution&) const = default;
};

struct ExecutionTable {
    std::vector<ComputeUnit> units;  // backends the engine creates, in this order
    std::vector<LayerExecution> layers;
    uint8_t embedding_unit = 0;  // reads the token-embedding rows
    uint8_t head_unit = 0;       // output norm and LM head
    int expert_level_unit = -1;  // holds the GPU level of the expert cache; -1: none

    // Every layer, the embedding and the head on one unit.
    static ExecutionTable on_one(ComputeUnit unit, uint32_t n_layer);
    // Layer l on units[assign[l]]; the embedding on the first layer's unit and the head on the
    // last's (tests of hand-overs between units).
    static ExecutionTable by_layer(std::vector<ComputeUnit> units, std::span<const int> assign);

    // An error naming what is wrong when the table does not fit a model of n_layer layers.
    Result<void> check(uint32_t n_layer) const;
    // A batch of n tokens of `layer` stages its work.
    bool stages(int layer, int64_t n) const {
        const LayerExecution& l = layers[size_t(layer)];
        return l.prompt != PromptStaging::None && n >= int64_t(l.prompt_min_tokens);
    }
};

// The table a plan implies: a GPU-resident plan runs everything on its GPU; a split runs the
// CPU's layers (or routed experts) on unit 0 and the GPU's on unit 1, stages prompt batches when
// the plan reserved room for it, and has the GPU level serve the CPU's experts when the plan
// sized one; otherwise everything runs on the CPU.
ExecutionTable execution_table(const Plan& plan, const ModelInfo& model);

// {"units": [{"kind": "cpu" | "gpu", "device", "staging_bytes", "expert_entries",
//             "expert_entry_bytes"}],
//  "embedding_unit", "head_unit", "expert_level_unit",
//  "layers": [{"unit", "experts_unit", "prompt": "none" | "matrices" | "experts", "staged_on",
//              "prompt_min_tokens", "expert_level"}]}
nlohmann::json execution_table_json(const ExecutionTable& table);

}  // namespace strata
