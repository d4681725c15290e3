// The steps of the sampler chain (penalties, top-k, top-p, min-p), one function each, apart from
// Sampler so that tests can check the exact set each step keeps; through Sampler only a random
// draw from that set would be visible.
//
// Every filter keeps a prefix of the candidates in one total order: higher logit first, lower
// token id first among equal logits. Such a prefix is "everything that ranks at or above a
// cutoff", so top-p and min-p only have to find their cutoff and then drop the rest in one
// stable pass. Candidates stay in token id order throughout, so the draw that follows is
// reproducible without sorting them and does not depend on how the standard library orders a
// heap or a partial sort.
//
// Inputs are assumed NaN-free; -inf is allowed and means "never pick this token".
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace strata {

struct Candidate {
    float logit;
    int32_t id;
};

// The total order of the filters: a ranks before b when its logit is higher, or equal with a
// lower id.
inline bool ranks_before(const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// llama.cpp's repetition penalties, on the tokens that occur in `window` (the recent history):
// a token seen `count` times gets logit / repeat if positive, logit * repeat otherwise, then
// minus count * frequency, minus presence. Tokens outside [0, logits.size()) are ignored.
// `counts` is scratch that must be all zeros (or empty) and is left all zeros; keeping it between
// calls makes the cost O(window) rather than O(vocabulary).
void apply_penalties(std::span<float> logits, std::span<const int32_t> window, float repeat,
                     float frequency, float presence, std::vector<int32_t>& counts);

// The candidates the chain starts from: every token whose logit is above -inf (the others can
// never be drawn, and no filter's outcome depends on them), in id order; with 0 < top_k < their
// number, only the top_k best of them. O(n) for typical logits, O(n log k) at worst.
void collect_candidates(std::span<const float> logits, int32_t top_k, std::vector<Candidate>& out);

// Nucleus: keeps the shortest prefix whose softmax probability (over the current candidates, at
// temperature 1) adds up to at least p; at least one candidate. p >= 1 keeps all.
void keep_top_p(std::vector<Candidate>& cands, float p);

// Keeps the candidates whose probability is at least min_p times the largest one, that is whose
// logit is at least max_logit + log(min_p). min_p <= 0 keeps all.
void keep_min_p(std::vector<Candidate>& cands, float min_p);

}  // namespace strata
