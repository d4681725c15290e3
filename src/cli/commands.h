// Each subcommand registers itself on the app; main() dispatches. Keeping one file per command
// keeps the front end thin: commands parse flags, call the library, and print.
#pragma once

#include <CLI/CLI.hpp>

namespace strata::cli {

void add_inspect(CLI::App& app);
void add_profile(CLI::App& app);
void add_synth(CLI::App& app);
void add_tokenize(CLI::App& app);
void add_template(CLI::App& app);
void add_run(CLI::App& app);
void add_perplexity(CLI::App& app);
void add_bench(CLI::App& app);
void add_serve(CLI::App& app);

}  // namespace strata::cli
