// The `airlock` command line: subcommand dispatch. Each subcommand lives in its own file and
// only turns flags into a library call and the outcome into output and an exit code.
#pragma once

#include <string>
#include <vector>

namespace airlock::cli {

int main(int argc, char** argv);

int runCommand(const std::vector<std::string>& args);     // airlock run
int policyCommand(const std::vector<std::string>& args);  // airlock policy check|explain
int doctorCommand(const std::vector<std::string>& args);  // airlock doctor
int serveCommand(const std::vector<std::string>& args);   // airlock serve

// Clients of a running `airlock serve` (client_support.h; one <name>_command.cc each).
int sandboxCommand(const std::vector<std::string>& args);  // airlock sandbox create|ls|get|rm|...
int execCommand(const std::vector<std::string>& args);     // airlock exec
int cmdCommand(const std::vector<std::string>& args);      // airlock cmd ls|attach|kill
int codeCommand(const std::vector<std::string>& args);     // airlock code
int filesCommand(const std::vector<std::string>& args);    // airlock files put|get|ls
// airlock review ls|approve|reject: the approval queue of held executions.
int reviewQueueCommand(const std::vector<std::string>& args);

int reviewCommand(const std::vector<std::string>& args);  // airlock review (review_command.cc)
int mcpCommand(const std::vector<std::string>& args);     // airlock mcp (mcp_command.cc)
int imageCommand(const std::vector<std::string>& args);   // airlock image (image_command.cc)
// airlock image prepare: the microVM backend's boot artifacts (image_prepare_command.cc).
int imagePrepareCommand(const std::vector<std::string>& args);
int toolsCommand(const std::vector<std::string>& args);  // airlock tools (tools_command.cc)
int auditCommand(const std::vector<std::string>& args);  // airlock audit tail|query
int topCommand(const std::vector<std::string>& args);
int fleetCommand(const std::vector<std::string>&
                     args);  // airlock fleet haproxy    // airlock top (top_command.cc)

// "airlock: <message>" on stderr.
void printError(const std::string& message);

// Whether `args` asks for help (--help or -h) among the subcommand's own words, i.e. before any
// "--": the hand-parsed subcommands answer it with their usage and exit 0.
bool wantsHelp(const std::vector<std::string>& args);

}  // namespace airlock::cli
