// Subcommands whose issues are not done yet. Each is registered with its help text so the CLI
// shape is fixed; running one exits 2 and says what is missing. Move a command out of this
// file into its own cmd_<name>.cpp when it is built.
#include <cstdio>

#include "commands.h"

namespace detmoe::cli {

int not_implemented(const char* what) {
  std::fprintf(stderr, "detmoe %s: not implemented yet in this build (see the project's open issues)\n", what);
  return kExitUsage;
}

namespace {
void add_placeholder(CLI::App& app, Action& run, const char* name, const char* help) {
  CLI::App* cmd = app.add_subcommand(name, help);
  cmd->allow_extras();
  cmd->callback([name, &run] { run = [name] { return not_implemented(name); }; });
}
}  // namespace


}  // namespace detmoe::cli
