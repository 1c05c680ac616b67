#include "cli/cli.h"

namespace qemb::cli {
// eval and fakequant arrive with the accuracy layer.
void add_eval_command(CLI::App&, Action&) {}
void add_fakequant_command(CLI::App&, Action&) {}
}  // namespace qemb::cli
