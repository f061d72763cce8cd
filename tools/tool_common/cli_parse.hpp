// The tools' command-line parsing: --help and --version print and succeed; a usage error (an
// unknown option, a bad value, a missing argument) is one line on stderr naming the tool and
// what was wrong, and exit status 2, alike in every tool.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>
#include <string>

namespace trn::tools {

constexpr int kExitUsage = 2;

// Whether the command line names `flag` as is: for a usage error, which leaves no parsed options
// (a tool whose --json promises one object on stdout reports that error as one too).
inline bool names_flag(int argc, char **argv, const char *flag) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == flag) return true;
  return false;
}

// nullopt: go on; else the status to exit with (`why`, if given, receives a usage error's line).
inline std::optional<int> parse_command_line(CLI::App &app, const char *tool, int argc, char **argv,
                                             std::string *why = nullptr) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError &e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::string what = e.what();
    for (char &c : what)
      if (c == '\n') c = ' ';
    what += std::string(" (") + tool + " --help lists the options)";
    std::fprintf(stderr, "%s: %s\n", tool, what.c_str());
    if (why) *why = what;
    return kExitUsage;
  }
}

}  // namespace trn::tools
