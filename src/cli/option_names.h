// Library errors name the option field they are about
// ("OnnxExportOptions.folded"); the command line speaks of its flags
// ("--folded"). One table maps the one to the other.
#pragma once

#include <string>

namespace qemb::cli {

// `message` with every option field the table knows replaced by its flag.
std::string with_flag_names(std::string message);

}  // namespace qemb::cli
