// mtx detect: the language of each input line (stdin or --input), with CLD2 (text/language_id.h): one line out
// per line in, `code<TAB>confidence` (the code in --scheme; "und" and 0 where none is told).
#include <fstream>
#include <iostream>
#include <string>

#include "commands.h"
#include "mtx/text/language_id.h"
#include "mtx/util/errors.h"

namespace mtx::cli {

namespace {

struct DetectArgs {
  std::string input;
  std::string scheme = "iso639-1";  // iso639-1 | iso639-3 | nllb
};

std::string code_in(const text::Language& l, const std::string& scheme) {
  if (scheme == "nllb") return l.nllb.empty() ? l.iso639_3 : l.nllb;
  if (scheme == "iso639-3") return l.iso639_3;
  return l.iso639_1.empty() ? l.iso639_3 : l.iso639_1;
}

int run_detect(const DetectArgs& args) {
  std::ifstream file;
  if (!args.input.empty()) {
    file.open(args.input);
    if (!file) throw DataError("--input: cannot read '" + args.input + "'");
  }
  std::istream& in = args.input.empty() ? std::cin : file;
  for (std::string line; std::getline(in, line);) {
    const std::vector<text::Detection> d = text::detect_language(line);
    if (d.empty()) {
      std::cout << "und\t0\n";
    } else {
      std::cout << code_in(*d.front().language, args.scheme) << '\t' << d.front().confidence << '\n';
    }
  }
  return 0;
}

}  // namespace

Command add_detect(CLI::App& app) {
  auto args = std::make_shared<DetectArgs>();
  auto* cmd = app.add_subcommand("detect", "Tell the language of each line (CLD2): code<TAB>confidence per line");
  cmd->add_option("--input", args->input, "Read this file instead of stdin");
  cmd->add_option("--scheme", args->scheme, "The codes written: iso639-1 (de), iso639-3 (deu) or nllb (deu_Latn)")
      ->capture_default_str()
      ->check(CLI::IsMember({"iso639-1", "iso639-3", "nllb"}));
  return {cmd, [args] { return run_detect(*args); }};
}

}  // namespace mtx::cli
