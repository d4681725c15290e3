#include <cstdio>

#include "cli/commands.h"
#include "gguf/reader.h"

namespace strata::cli {

void add_inspect(CLI::App& app) {
    auto* cmd = app.add_subcommand("inspect", "Describe a GGUF model: metadata, tensors, sizes");
    auto path = std::make_shared<std::string>();
    cmd->add_option("model", *path, "GGUF model file")->required();
    cmd->callback([path] {
        auto f = read_gguf(*path);
        if (!f) {
            std::fprintf(stderr, "strata: %s\n", f.error().message.c_str());
            throw CLI::RuntimeError(1);
        }
        std::printf("%s: GGUF v%u, %zu tensors, %zu metadata keys\n", path->c_str(), f->version,
                    f->tensors.size(), f->metadata.size());
    });
}

}  // namespace strata::cli
