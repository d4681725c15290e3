// Stop strings for streamed generation. Text arrives a token at a time, and a stop string can be
// split across tokens ("<|us" + "er|>"), so text that might be the start of a stop string is held
// back until the next pieces show whether it is one. No byte of the stop string that ends the
// generation is ever returned, and nothing after it.
//
// Which stop wins is decided as if the whole text were searched at once, so the output does not
// depend on how the text was cut into pieces: the occurrence that starts earliest wins; of two
// that start at the same place, the shorter one (it is complete first, and the text before it is
// the same either way, only matched() differs). One consequence: when one stop string contains
// another after its start ("abcd" and "bc"), seeing "abc" is not enough to stop yet, since "abcd"
// would start earlier; stopped() turns true once the next piece (or flush) settles it.
//
// Matching is on bytes. Returned text also never ends inside a UTF-8 character that the next
// piece may complete, so for valid UTF-8 input every returned piece is valid UTF-8 on its own.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

// The earliest position from which the rest of `text` is a proper prefix of one of `markers`:
// where a marker split across pieces may still turn out to start, so the text from there on must
// be held back. npos when no suffix of the text can begin a marker. Also used by the reply parser
// for its tags.
size_t first_partial_marker(std::span<const std::string> markers, std::string_view text);

class StopStringMatcher {
  public:
    // Empty strings are ignored.
    explicit StopStringMatcher(std::vector<std::string> stops);

    // Adds generated text; returns the text that is now safe to emit (possibly empty). Once a
    // stop string is found, stopped() is true, the returned text ends right before it, and later
    // calls return nothing.
    std::string feed(std::string_view text);
    // At the end of generation: the text held back, now known not to be a stop string (or, when
    // a found stop was waiting for an earlier candidate that can now never complete, the text
    // before that stop, with stopped() turning true).
    std::string flush();

    bool stopped() const { return stopped_; }
    // The stop string that ended the generation; empty while !stopped().
    const std::string& matched() const { return matched_; }

  private:
    std::string release(bool at_end);

    std::vector<std::string> stops_;
    std::string held_;
    bool stopped_ = false;
    std::string matched_;
};

}  // namespace strata
