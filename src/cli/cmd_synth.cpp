#include "cli/commands.h"

namespace strata::cli {

void add_synth(CLI::App& app) {
    app.add_subcommand("synth", "Write a synthetic GGUF model with seeded random weights");
}

}  // namespace strata::cli
