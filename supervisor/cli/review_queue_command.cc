// airlock review ls|approve|reject: the executions a running `airlock serve` holds for approval.
#include <algorithm>
#include <boost/program_options.hpp>
#include <iostream>

#include "supervisor/cli/cli.h"
#include "supervisor/cli/client_support.h"

namespace po = boost::program_options;

namespace airlock::cli {

namespace {

using client::percentEncode;

constexpr const char* kReviewQueueUsage = R"(Usage:
  airlock review ls [--json]
  airlock review approve RID [--reason TEXT]
  airlock review reject RID [--reason TEXT]

Executions that a review rule held for approval wait in a running `airlock serve` until an
operator decides or their deadline passes (then they are denied). `ls` lists the pending ones
with the rule that held them and a preview of the code; `approve` lets one run, `reject` denies
it with the reason, which its caller sees. Only over the Unix socket (not TCP tokens).

Exit code: 0 on success; 125 when the request failed (e.g. the review already ended: 404).
)";

int reviewList(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  bool json = false;
  po::options_description opts("Usage: airlock review ls [--json]\n\nOptions");
  opts.add_options()("json", po::bool_switch(&json), "print the answer as JSON");
  po::variables_map vm;
  if (auto exit = parseArgs("review ls", args, opts, vm, positional)) return *exit;
  if (!positional.empty())
    return report("review ls: unexpected '" + positional[0] + "'"), kExitFailed;
  auto c = connectClient();
  if (!c) return report(c.error().message()), kExitFailed;
  return orFail(c->call("GET", "/v1/reviews"), [&](const Json& answer) {
    if (json) {
      std::cout << answer.dump(2) << "\n";
      return 0;
    }
    int64_t now = nowMs();
    std::vector<std::vector<std::string>> rows = {
        {"REVIEW", "SANDBOX", "TENANT", "KIND", "RULE", "WAITING", "DEADLINE", "PREVIEW"}};
    if (answer.contains("reviews") && answer["reviews"].is_array())
      for (const auto& r : answer["reviews"]) {
        std::string preview = str(r, "preview");
        for (char& ch : preview)
          if (ch == '\n' || ch == '\t') ch = ' ';
        if (preview.size() > 40) preview = preview.substr(0, 39) + "~";
        rows.push_back({str(r, "review_id"), str(r, "sandbox_id"), str(r, "tenant"),
                        str(r, "kind") + "/" + str(r, "language"),
                        str(r, "reviewer") + ":" + str(r, "rule"),
                        humanDuration(std::max<int64_t>(0, now - num(r, "requested_at"))),
                        untilText(num(r, "deadline_at"), now), preview});
      }
    printTable(rows);
    return 0;
  });
}

int reviewDecide(const std::string& verb, const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  std::string reason;
  po::options_description opts("Usage: airlock review " + verb + " RID [--reason TEXT]\n\nOptions");
  opts.add_options()("reason", po::value(&reason), "why, recorded and shown to the caller");
  po::variables_map vm;
  if (auto exit = parseArgs("review " + verb, args, opts, vm, positional)) return *exit;
  if (positional.size() != 1)
    return report("review " + verb + ": expected one review id (see `airlock review ls`)"),
           kExitFailed;
  auto c = connectClient();
  if (!c) return report(c.error().message()), kExitFailed;
  Json body = Json::object();
  if (!reason.empty()) body["reason"] = reason;
  return orFail(c->call("POST", "/v1/reviews/" + percentEncode(positional[0]) + "/" + verb, body),
                [&](const Json&) {
                  std::cout << (verb == "approve" ? "approved " : "rejected ") << positional[0]
                            << "\n";
                  return 0;
                });
}

}  // namespace

int reviewQueueCommand(const std::vector<std::string>& args) {
  if (args.empty()) return std::cout << kReviewQueueUsage, kExitFailed;
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "ls" || args[0] == "list") return reviewList(rest);
  if (args[0] == "approve" || args[0] == "reject") return reviewDecide(args[0], rest);
  report("review: unknown subcommand '" + args[0] + "'\n" + kReviewQueueUsage);
  return kExitFailed;
}

}  // namespace airlock::cli
