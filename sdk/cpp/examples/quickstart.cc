// The README's C++ quick start, built with the SDK and run by tests/sdk/cpp_sdk_test.cc against a
// real supervisor, so the snippet users copy is known to work. AIRLOCK_URL says where the
// supervisor is (default unix:///run/airlock/airlock.sock).
#include <airlock/client/sandbox.h>
#include <iostream>

int main() {
  auto sbx = airlock::sdk::Sandbox::create({.language = "python"});  // destroyed at scope end
  if (!sbx) return std::cerr << sbx.error().message() << "\n", 1;
  auto ex = sbx->runCode("import statistics\nstatistics.mean([1, 2, 6])");
  if (ex) std::cout << ex->text() << "\n";  // 3
  auto ls = sbx->commands().run("ls -la /home/user");
  if (ls) std::cout << ls->stdout_text;
}
