#include "supervisor/review/shell_scan.h"

#include <algorithm>
#include <array>

namespace airlock::review {

namespace {

// Builtins that run text the scan cannot see, whatever an allowlist says.
constexpr std::array<std::string_view, 8> kOpaque = {"eval",    "source",  ".",     "exec",
                                                     "builtin", "command", "alias", "trap"};
// Reserved words after which a command word follows.
constexpr std::array<std::string_view, 12> kTransparent = {
    "if", "then", "else", "elif", "fi", "while", "until", "do", "done", "{", "}", "!"};
// Compound commands whose words are not all commands; refused rather than half-parsed.
constexpr std::array<std::string_view, 7> kUnjudged = {"for",    "case", "select", "function",
                                                       "coproc", "[[",   "(("};
// Assignments that change how later command words are found or what the shell runs.
constexpr std::array<std::string_view, 7> kDangerousAssignments = {
    "PATH", "ENV", "BASH_ENV", "IFS", "CDPATH", "SHELLOPTS", "PS4"};

enum class TokenKind { kWord, kSeparator, kRedirect, kOpenParen, kCloseParen };

struct Token {
  TokenKind kind;
  std::string text;         // unquoted word, or the operator
  bool quoted = false;      // any part of the word was quoted or escaped
  bool has_dollar = false;  // an unquoted or double-quoted '$' expansion
  bool has_glob = false;    // an unquoted * ? [
};

bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

bool contains(auto& list, std::string_view word) {
  return std::ranges::find(list, word) != list.end();
}

class Scanner {
 public:
  explicit Scanner(std::string_view s) : s_(s) {}

  ShellScan run() {
    // Substitutions anywhere (even inside double quotes or here-documents) run text we cannot
    // judge: refuse before tokenizing.
    for (std::string_view bad : {"$(", "`", "<(", ">("}) {
      if (s_.find(bad) != std::string_view::npos) {
        return refuse("substitution", "uses '" + std::string(bad) +
                                          "' (command or process substitution), which the shell "
                                          "reviewer cannot judge");
      }
    }
    std::vector<Token> tokens;
    if (!tokenize(tokens)) return out_;
    walk(tokens);
    return out_;
  }

 private:
  ShellScan refuse(std::string rule, std::string reason) {
    out_.refused_rule = std::move(rule);
    out_.refused_reason = std::move(reason);
    return out_;
  }

  bool tokenize(std::vector<Token>& tokens) {
    size_t i = 0;
    while (i < s_.size()) {
      char c = s_[i];
      if (c == ' ' || c == '\t') {
        ++i;
      } else if (c == '\\' && i + 1 < s_.size() && s_[i + 1] == '\n') {
        i += 2;  // line continuation
      } else if (c == '#') {
        while (i < s_.size() && s_[i] != '\n') ++i;
      } else if (c == '\n' || c == ';' || c == '&' || c == '|') {
        size_t len = (i + 1 < s_.size() && (s_[i + 1] == c || (c == '|' && s_[i + 1] == '&') ||
                                            (c == '&' && s_[i + 1] == '>')))
                         ? 2
                         : 1;
        std::string op(s_.substr(i, len));
        if (op == "&>") {
          tokens.push_back({TokenKind::kRedirect, op});
        } else {
          tokens.push_back({TokenKind::kSeparator, op});
        }
        i += len;
      } else if (c == '(' || c == ')') {
        tokens.push_back(
            {c == '(' ? TokenKind::kOpenParen : TokenKind::kCloseParen, std::string(1, c)});
        ++i;
      } else if (c == '<' || c == '>') {
        if (s_.substr(i, 2) == "<<" && s_.substr(i, 3) != "<<<") {
          refuse("heredoc", "uses a here-document, which the shell reviewer does not judge");
          return false;
        }
        size_t j = i + 1;
        while (j < s_.size() && (s_[j] == '<' || s_[j] == '>' || s_[j] == '&' || s_[j] == '|')) ++j;
        tokens.push_back({TokenKind::kRedirect, std::string(s_.substr(i, j - i))});
        i = j;
      } else {
        Token word{TokenKind::kWord, {}};
        if (!readWord(i, word)) return false;
        // "2>file": a file descriptor number glued to a redirection.
        if (i < s_.size() && (s_[i] == '<' || s_[i] == '>') && !word.quoted &&
            std::ranges::all_of(word.text, [](char d) { return d >= '0' && d <= '9'; })) {
          continue;
        }
        tokens.push_back(std::move(word));
      }
    }
    return true;
  }

  // One word up to an unquoted metacharacter; quotes and escapes removed.
  bool readWord(size_t& i, Token& word) {
    while (i < s_.size()) {
      char c = s_[i];
      if (c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '&' || c == '|' || c == '(' ||
          c == ')' || c == '<' || c == '>') {
        return true;
      }
      if (c == '\\') {
        word.quoted = true;
        if (i + 1 < s_.size()) word.text += s_[i + 1];
        i += 2;
      } else if (c == '\'') {
        size_t end = s_.find('\'', i + 1);
        if (end == std::string_view::npos) {
          refuse("syntax", "has an unterminated single quote");
          return false;
        }
        word.quoted = true;
        word.text += s_.substr(i + 1, end - i - 1);
        i = end + 1;
      } else if (c == '"') {
        word.quoted = true;
        size_t j = i + 1;
        for (; j < s_.size() && s_[j] != '"'; ++j) {
          if (s_[j] == '\\' && j + 1 < s_.size()) {
            word.text += s_[++j];
            continue;
          }
          if (s_[j] == '$') word.has_dollar = true;
          word.text += s_[j];
        }
        if (j >= s_.size()) {
          refuse("syntax", "has an unterminated double quote");
          return false;
        }
        i = j + 1;
      } else {
        if (c == '$') word.has_dollar = true;
        if (c == '*' || c == '?' || c == '[') word.has_glob = true;
        word.text += c;
        ++i;
      }
    }
    return true;
  }

  // Walks the tokens knowing whether the next word is in command position.
  void walk(const std::vector<Token>& tokens) {
    bool command_position = true;
    for (size_t i = 0; i < tokens.size() && !out_.refused(); ++i) {
      const Token& t = tokens[i];
      switch (t.kind) {
        case TokenKind::kSeparator:
          command_position = true;
          break;
        case TokenKind::kOpenParen:
          if (!command_position) {
            refuse("function", "defines a shell function, which the shell reviewer does not judge");
            return;
          }
          break;  // a subshell: its first word is a command
        case TokenKind::kCloseParen:
          command_position = false;
          break;
        case TokenKind::kRedirect:
          if (i + 1 >= tokens.size() || tokens[i + 1].kind != TokenKind::kWord) {
            refuse("syntax", "has a redirection '" + t.text + "' without a target");
            return;
          }
          ++i;  // the target is a file name (or a descriptor), not a command
          break;
        case TokenKind::kWord:
          if (command_position) commandWord(t, command_position);
          break;
      }
    }
  }

  void commandWord(const Token& t, bool& command_position) {
    const std::string& w = t.text;
    if (!t.quoted) {
      if (contains(kTransparent, w)) return;
      if (contains(kUnjudged, w)) {
        refuse("construct", "uses '" + w + "', which the shell reviewer does not judge");
        return;
      }
      // NAME=value before a command: an assignment, not the command.
      size_t eq = w.find('=');
      if (eq != std::string::npos && eq > 0 &&
          std::all_of(w.begin(), w.begin() + static_cast<long>(eq), isNameChar)) {
        std::string name = w.substr(0, eq);
        if (contains(kDangerousAssignments, name) || name.starts_with("LD_")) {
          refuse("assignment", "assigns " + name + ", which changes what later commands run");
        }
        return;
      }
    }
    if (t.has_dollar || t.has_glob) {
      refuse("dynamic-command", "computes a command name at run time ('" + w + "')");
      return;
    }
    if (contains(kOpaque, w)) {
      refuse("opaque", "uses '" + w + "', which runs commands the shell reviewer cannot see");
      return;
    }
    out_.commands.push_back(w);
    command_position = false;
  }

  std::string_view s_;
  ShellScan out_;
};

}  // namespace

ShellScan scanShell(std::string_view script) { return Scanner(script).run(); }

}  // namespace airlock::review
