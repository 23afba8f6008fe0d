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

// "airlock: <message>" on stderr.
void printError(const std::string& message);

}  // namespace airlock::cli
