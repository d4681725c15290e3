#include "session/prompt.h"

namespace strata {

std::vector<TokenId> tokenize_prompt(const Tokenizer& tokenizer, const std::string& text) {
    const Vocab& v = tokenizer.vocab();
    TokenizeOptions opt;
    opt.parse_special = true;
    opt.add_special = v.add_bos();
    const TokenId bos = v.special().bos;
    if (opt.add_special && v.contains(bos)) {
        const std::string& bos_text = tokenizer.piece(bos);
        if (!bos_text.empty() && text.starts_with(bos_text)) opt.add_special = false;
    }
    return tokenizer.tokenize(text, opt);
}

Result<std::string> render_chat(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages) {
    nlohmann::ordered_json ctx;
    ctx["messages"] = messages;
    ctx["add_generation_prompt"] = true;
    return tmpl.render(ctx);
}

}  // namespace strata
