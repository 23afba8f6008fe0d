// The airlock executable: everything lives in the library; this only hands over argv.
#include "supervisor/cli/cli.h"

int main(int argc, char** argv) { return airlock::cli::main(argc, argv); }
