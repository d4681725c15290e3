// strata serve MODEL [MODEL...] [--host 127.0.0.1] [--port 11434] [--context 4096] [flags]
//
// Serves the models over Ollama's HTTP API (and OpenAI's /v1), so that tools written for Ollama
// work unchanged when pointed at strata. Each model is known by its file name without .gguf
// (`name:latest`) unless --alias names it, is loaded on first use and kept per keep_alive,
// within the RAM budget. OLLAMA_HOST (host:port, :port or scheme://host:port) sets the address
// when --host/--port are not given.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/commands.h"
#include "cli/run_options.h"
#include "server/chat_page.h"
#include "server/http_server.h"
#include "util/units.h"

namespace strata::cli {

namespace {

struct ServeCommand {
    std::vector<std::string> models;
    std::vector<std::string> aliases;
    std::string host = "127.0.0.1";
    int port = 11434;
    uint32_t context = kDefaultContextCap;
    std::vector<std::string> origins;
    size_t max_queue = 64;
    uint32_t parallel = 0;  // 0: as many of kDefaultParallel as the budget allows
    std::string keep_alive = "5m";
    EngineFlags engine;
};

server::HttpServer* g_server = nullptr;

void on_signal(int) {
    if (g_server) g_server->stop();
}

// OLLAMA_HOST: "host:port", ":port", "host", or with an http(s):// scheme.
void apply_ollama_host(const char* env, std::string& host, int& port) {
    std::string v = env;
    for (std::string_view scheme : {"http://", "https://"}) {
        if (v.starts_with(scheme)) v.erase(0, scheme.size());
    }
    while (!v.empty() && v.back() == '/') v.pop_back();
    const size_t colon = v.rfind(':');
    if (colon != std::string::npos && v.find(']', colon) == std::string::npos) {
        if (colon > 0) host = v.substr(0, colon);
        port = std::atoi(v.c_str() + colon + 1);
    } else if (!v.empty()) {
        host = v;
    }
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
}

// What the server holds besides the models' weights and engines: the process now (code, the
// catalog's descriptions), what each model adds when it is loaded besides what its plan counts
// (its own copy of the description and a tokenizer: measured by building them once, every model
// may be loaded at once), and the HTTP side.
std::optional<uint64_t> served_baseline(const server::ModelCatalog& catalog,
                                        const server::ServerOptions& so) {
    auto now = measure_baseline();
    if (!now) return std::nullopt;
    uint64_t total = *now;
    for (const server::ServedModelInfo& m : catalog.models()) {
        auto before = measure_baseline();
        auto built = ModelDescription::from(m.info);
        auto after = measure_baseline();
        if (built && before && after && *after > *before) total += *after - *before;
    }
    return total + server::server_memory_bytes(so);
}

// The plans of every model for the context it is served with now, against the one RAM budget
// they share, through the same function as every other command.
Result<std::vector<Plan>> plans_for(const server::ModelCatalog& catalog, PlanFlags flags,
                                    std::optional<uint64_t> baseline) {
    std::vector<PlanTarget> targets;
    for (const server::ServedModelInfo& m : catalog.models()) {
        targets.push_back({m.info, m.path, m.served_context});
    }
    flags.embeddings = true;  // /api/embed hands out a context's hidden states
    return plan_models(targets, flags, baseline);
}

// True when every model keeps the kind of plan it has in `base` (the same mode, on the GPU or
// not): a longer context must not make generation slower.
bool same_kind(const std::vector<Plan>& plans, const std::vector<Plan>& base) {
    for (size_t i = 0; i < plans.size(); ++i) {
        if (plans[i].mode != base[i].mode || plans[i].gpu_device != base[i].gpu_device ||
            plans[i].gpu_layers != base[i].gpu_layers) {
            return false;
        }
    }
    return true;
}

// Sequences each model decodes together when --parallel is not given, as far as the budget
// allows their KV caches without a slower plan.
constexpr uint32_t kDefaultParallel = 4;

// Plans every model against the one RAM budget they share; a model that fits no plan stops the
// server before it listens. Without a context from the command line each model is served with
// its trained context length as far as the budget allows: the longest of trained, trained / 2,
// ... down to the default 4096 at which every model keeps the kind of plan it gets at 4096
// (agents send prompts of 12-27k tokens). Then, without --parallel, each model gets KV caches for
// 4 sequences decoded together, or 2, or 1: the most that keep every plan's kind (the context
// comes first: a long prompt must fit). Returns the budget.
uint64_t plan_served_models(server::ModelCatalog& catalog, PlanFlags flags,
                            const server::ServerOptions& so, bool context_given,
                            uint32_t parallel) {
    const std::optional<uint64_t> baseline = served_baseline(catalog, so);
    flags.n_seq = parallel ? parallel : 1;
    auto plans = plans_for(catalog, flags, baseline);
    if (!plans) fail(plans.error().message);
    if (!context_given) {
        uint32_t longest = 0;
        for (const auto& m : catalog.models()) {
            longest = std::max(longest, m.info.hparams ? m.info.hparams->n_ctx_train : 0u);
        }
        for (uint32_t cap = longest; cap > kDefaultContextCap; cap /= 2) {
            catalog.cap_context(cap);
            auto longer = plans_for(catalog, flags, baseline);
            if (longer && same_kind(*longer, *plans)) {
                plans = std::move(longer);
                break;
            }
            catalog.cap_context(kDefaultContextCap);
        }
    }
    if (!parallel) {
        for (uint32_t n = kDefaultParallel; n > 1; n /= 2) {
            flags.n_seq = n;
            auto wider = plans_for(catalog, flags, baseline);
            if (wider && same_kind(*wider, *plans)) {
                plans = std::move(wider);
                break;
            }
        }
    }
    if (!plans->empty()) say_where_it_runs(plans->front());
    for (size_t i = 0; i < plans->size(); ++i) catalog.set_plan(i, std::move((*plans)[i]));
    return catalog.models().front().plan->budgets.ram;
}

void serve_command(ServeCommand& c, bool host_given, bool port_given, bool context_given) {
    if (const char* env = std::getenv("OLLAMA_HOST"); env && *env && !host_given && !port_given) {
        apply_ollama_host(env, c.host, c.port);
    }
    // --ctx, which sizes the context of every other command, says the same as --context here.
    const bool ctx_given = c.engine.plan.ctx != 0;
    if (ctx_given) {
        if (context_given && c.context != c.engine.plan.ctx) {
            fail("--ctx " + std::to_string(c.engine.plan.ctx) + " and --context " +
                 std::to_string(c.context) + " disagree: give one of them");
        }
        c.context = c.engine.plan.ctx;
    }
    auto catalog = server::ModelCatalog::open(c.models, c.aliases, c.context);
    if (!catalog) fail(catalog.error().message);
    c.engine.plan.ctx = 0;  // each model's served context (plan_served_models)
    auto opts = model_load_options(c.engine, false);
    if (!opts) fail(opts.error().message);
    server::ServerOptions so;
    so.host = c.host;
    so.port = c.port;
    so.cors_origins = c.origins;
    if (const char* env = std::getenv("OLLAMA_ORIGINS")) {
        std::string list = env;
        for (size_t at = 0; at <= list.size();) {
            const size_t comma = std::min(list.find(',', at), list.size());
            if (comma > at) so.cors_origins.push_back(list.substr(at, comma - at));
            at = comma + 1;
        }
    }
    so.max_queue = c.max_queue;
    so.log_requests = true;
    const uint64_t budget =
        plan_served_models(*catalog, c.engine.plan, so, context_given || ctx_given, c.parallel);
    try {
        so.default_keep_alive =
            server::parse_keep_alive({{"keep_alive", c.keep_alive}}, std::nullopt);
    } catch (const server::ApiError& e) {
        fail(std::string("--keep-alive: ") + e.what());
    }
    server::HttpServer srv(std::move(*catalog), std::move(*opts), budget, so);
    auto port = srv.bind();
    if (!port) fail(port.error().message);
    for (const auto& m : srv.catalog().models()) {
        std::fprintf(stderr,
                     "strata: serving %s as %s (context %u, %u sequences decoded together, %s, "
                     "%s of the %s budget)\n",
                     m.path.c_str(), m.name.c_str(), m.served_context, m.plan->n_seq,
                     std::string(plan_mode_name(m.plan->mode)).c_str(),
                     format_bytes(m.plan->memory.total).c_str(), format_bytes(budget).c_str());
    }
    std::fprintf(stderr, "strata: listening on http://%s:%d\n", c.host.c_str(), *port);
    // A wildcard address is not one a browser can open; this machine reaches it on loopback.
    std::string page_host = c.host == "0.0.0.0" ? "127.0.0.1" : c.host == "::" ? "::1" : c.host;
    if (page_host.find(':') != std::string::npos) page_host = "[" + page_host + "]";
    std::fprintf(stderr, "strata: chat in a browser at http://%s:%d%s\n", page_host.c_str(), *port,
                 std::string(server::kChatPagePath).c_str());
    std::signal(SIGPIPE, SIG_IGN);
    g_server = &srv;
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    srv.listen();
    g_server = nullptr;
}

}  // namespace

void add_serve(CLI::App& app) {
    auto c = std::make_shared<ServeCommand>();
    CLI::App* cmd =
        app.add_subcommand("serve", "Serve models over Ollama's (and OpenAI's) HTTP API");
    cmd->add_option("models", c->models, "GGUF model files to serve")->required();
    cmd->add_option("--alias", c->aliases,
                    "Name for the model at the same position (repeatable; default: file name)");
    auto* host = cmd->add_option(
        "--host", c->host,
        "Address to listen on (default 127.0.0.1; 0.0.0.0 opens it to the network)");
    auto* port = cmd->add_option("--port", c->port, "Port (default 11434, Ollama's)");
    auto* context = cmd->add_option(
        "--context", c->context,
        "Context positions per model (default: the trained length as far as the RAM budget "
        "allows without a slower plan, at least 4096; --ctx too)");
    context->capture_default_str();
    cmd->add_option("--cors-origin", c->origins,
                    "Browser origin to allow besides localhost (repeatable; * allows all)");
    cmd->add_option("--max-queue", c->max_queue,
                    "Requests waiting or running before new ones get 503")
        ->capture_default_str();
    cmd->add_option("--parallel", c->parallel,
                    "Requests a model decodes together, each with its own KV cache (default: "
                    "up to 4, as far as the memory budget allows)")
        ->check(CLI::Range(1u, 64u));
    cmd->add_option("--keep-alive", c->keep_alive,
                    "How long a model stays loaded after a request (5m, 1h, -1 forever)")
        ->capture_default_str();
    add_engine_flags(*cmd, c->engine);
    cmd->callback([c, host, port, context] {
        serve_command(*c, host->count() > 0, port->count() > 0, context->count() > 0);
    });
}

}  // namespace strata::cli
