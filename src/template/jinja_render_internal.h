// What the renderer's files share (jinja_renderer.cpp: expressions, calls, variables;
// jinja_statements.cpp: statements and macros). Internal to the template implementation.
#pragma once

namespace strata::jinja {

// Counts nesting of evaluation; construction fails past the limit.
class EvalDepth {
  public:
    explicit EvalDepth(int& depth) : depth_(depth) { ++depth_; }
    ~EvalDepth() { --depth_; }
    EvalDepth(const EvalDepth&) = delete;
    EvalDepth& operator=(const EvalDepth&) = delete;

  private:
    int& depth_;
};

}  // namespace strata::jinja
