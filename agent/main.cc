// airlock-agent [--channel-fd N | --channel-stdio] [--reattach-grace-ms MS] [--reattach-by-helper |
//               --reattach-in-place] [--announce-ready] [--own-kernel]
// airlock-agent --unpack DIR ... | --pack DIR ...   (transfer_helper.h)
// airlock-agent --rechannel [--agent-pid N]          (rechannel.h)
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "agent.h"
#include "rechannel.h"
#include "transfer_helper.h"

int main(int argc, char** argv) {
  // The transfer helper (transfer_helper.h): the same binary, exec'd inside the sandbox.
  if (argc >= 2 && (std::strcmp(argv[1], "--unpack") == 0 || std::strcmp(argv[1], "--pack") == 0))
    return airlock::agent::transferHelperMain(argc, argv);
  if (argc >= 2 && std::strcmp(argv[1], "--rechannel") == 0)
    return airlock::agent::rechannelMain(argc, argv);
  airlock::agent::Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--channel-fd" && i + 1 < argc) {
      char* end = nullptr;
      long fd = std::strtol(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || fd < 0 || fd > 1 << 20) return 2;
      options.channel_in = options.channel_out = static_cast<int>(fd);
    } else if (arg == "--reattach-grace-ms" && i + 1 < argc) {
      char* end = nullptr;
      long ms = std::strtol(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || ms < 0 || ms > 24L * 3600 * 1000) return 2;
      options.reattach_grace_ms = static_cast<int>(ms);
    } else if (arg == "--reattach-by-helper") {
      options.reattach_by_helper = true;
    } else if (arg == "--reattach-in-place") {
      options.reattach_in_place = true;
    } else if (arg == "--announce-ready") {
      options.announce_ready = true;
    } else if (arg == "--own-kernel") {
      options.own_kernel = true;
    } else if (arg == "--channel-stdio") {
      options.channel_in = 0;
      options.channel_out = 1;
    } else {
      // stderr is /dev/null inside a sandbox; this only helps someone running it by hand.
      const char usage[] =
          "usage: airlock-agent [--channel-fd N | --channel-stdio] [--reattach-grace-ms MS] "
          "[--reattach-by-helper | --reattach-in-place] [--announce-ready] [--own-kernel]\n";
      ssize_t ignored = write(2, usage, sizeof(usage) - 1);
      (void)ignored;
      return 2;
    }
  }
  return airlock::agent::run(options);
}
