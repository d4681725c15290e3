#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "util/allocator.h"

int main(int argc, char** argv) {
    // Before anything is allocated: freed memory goes back to the system, not into RSS that no
    // plan counts (util/allocator.h).
    strata::bound_allocator_slack();
    CLI::App app{"strata — run GGUF language models larger than memory"};
    app.set_version_flag("--version", std::string("strata ") + STRATA_VERSION);
    app.require_subcommand(1);
    strata::cli::add_inspect(app);
    strata::cli::add_profile(app);
    strata::cli::add_synth(app);
    strata::cli::add_tokenize(app);
    strata::cli::add_template(app);
    strata::cli::add_run(app);
    strata::cli::add_perplexity(app);
    strata::cli::add_bench(app);
    strata::cli::add_serve(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "strata: %s\n", e.what());
        return 1;
    }
    return 0;
}
