#include "toml_text.h"

namespace airlock::policy::detail {
namespace {

bool isAscii(char c) { return static_cast<unsigned char>(c) < 0x80; }

class Scanner {
 public:
  explicit Scanner(std::string_view text) : s_(text) {}

  std::optional<TextProblem> run() {
    // A UTF-8 byte order mark is allowed at the start; toml++ skips it itself.
    if (s_.starts_with("\xEF\xBB\xBF")) i_ = 3;
    // The last character outside strings and comments other than a blank: a quote opens a
    // string only where a key or a value starts, as in toml++ (in `x = 1"é` the quote belongs to
    // the bare value, which toml++ reads on, asking about each character).
    char last = '\n';
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;  // a comment, up to its newline
        continue;
      }
      const bool opens =
          last == '\n' || last == '=' || last == '[' || last == ',' || last == '{' || last == '.';
      if ((c == '"' || c == '\'') && opens) {
        if (s_.compare(i_, 3, "\"\"\"") == 0) {
          i_ += 3;
          if (auto p = multiLineBasic()) return p;
        } else if (s_.compare(i_, 3, "\'\'\'") == 0) {
          i_ += 3;
          multiLineLiteral();
        } else if (c == '"') {
          ++i_;
          basic();
        } else {
          ++i_;
          literal();
        }
        last = c;
        continue;
      }
      if (!isAscii(c))
        return problem("invalid TOML: a non-ASCII character outside a string or comment");
      if (c != ' ' && c != '\t' && c != '\r') last = c;
      ++i_;
    }
    return std::nullopt;
  }

 private:
  // A single-line string ends at its quote, or at a newline, where toml++ reports the error.
  void literal() {
    while (i_ < s_.size() && s_[i_] != '\'' && s_[i_] != '\n') ++i_;
    if (i_ < s_.size() && s_[i_] == '\'') ++i_;
  }

  void basic() {
    while (i_ < s_.size() && s_[i_] != '"' && s_[i_] != '\n') i_ += s_[i_] == '\\' ? 2 : 1;
    if (i_ < s_.size() && s_[i_] == '"') ++i_;
  }

  // After the opening quotes: up to and past the closing ones (with the up to two quotes that
  // may come before them).
  void closeMultiLine(char quote) {
    size_t run = 0;
    while (i_ + run < s_.size() && s_[i_ + run] == quote && run < 5) ++run;
    i_ += run;
  }

  void multiLineLiteral() {
    while (i_ < s_.size()) {
      if (s_.compare(i_, 3, "'''") == 0) return closeMultiLine('\'');
      ++i_;
    }
  }

  std::optional<TextProblem> multiLineBasic() {
    while (i_ < s_.size()) {
      if (s_.compare(i_, 3, "\"\"\"") == 0) {
        closeMultiLine('"');
        return std::nullopt;
      }
      if (s_[i_] != '\\') {
        ++i_;
        continue;
      }
      // A backslash with only blanks after it on its line trims the line end and the blanks
      // that follow: toml++ asks about the first other character.
      size_t j = i_ + 1;
      while (j < s_.size() && (s_[j] == ' ' || s_[j] == '\t' || s_[j] == '\r')) ++j;
      if (j < s_.size() && s_[j] == '\n') {
        while (j < s_.size() && (s_[j] == ' ' || s_[j] == '\t' || s_[j] == '\r' || s_[j] == '\n'))
          ++j;
        i_ = j;
        if (i_ < s_.size() && !isAscii(s_[i_]))
          return problem(
              "a non-ASCII character right after a line-ending backslash is not supported; "
              "escape it (\\uXXXX) or start the line with an ASCII character");
        continue;
      }
      i_ += 2;  // an escape: the escaped character is never a closing quote
    }
    return std::nullopt;
  }

  TextProblem problem(std::string message) const {
    TextProblem p{1, 1, std::move(message)};
    for (size_t k = 0; k < i_; ++k) {
      if (s_[k] == '\n') {
        ++p.line;
        p.column = 1;
      } else if ((static_cast<unsigned char>(s_[k]) & 0xC0) != 0x80) {
        ++p.column;  // continuation bytes are part of the code point before them
      }
    }
    return p;
  }

  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

std::optional<TextProblem> findUnsafeNonAscii(std::string_view text) { return Scanner(text).run(); }

}  // namespace airlock::policy::detail
