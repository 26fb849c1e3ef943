// mtx: train, translate with and score Transformer translation models.
// The subcommand table, --version, and the one place that maps errors to exit codes.
#include <c10/util/Exception.h>

#include <cstdio>
#include <iostream>
#include <vector>

#include "commands.h"
#include "mtx/model/fp32_gemm.h"
#include "mtx/model/linear.h"
#include "mtx/util/errors.h"
#include "mtx/util/logging.h"
#include "mtx/util/system.h"

namespace {

// " (7-bit activations, oneDNN's GEMM from 32 rows)" after mtx's int8 kernel; nothing for LibTorch's engines.
std::string int8_detail() {
  if (!mtx::model::int8::KernelLinear::available()) return "";
  const int64_t rows = mtx::model::int8::onednn_from_rows();
  return " (" + std::to_string(mtx::model::int8::activation_bits()) + "-bit activations" +
         (rows > 0 ? ", oneDNN's GEMM from " + std::to_string(rows) + " rows" : std::string()) + ")";
}

std::string version_text() {
  // The int8 kernel's settings first (a bad MTX_INT8_ACTIVATION_BITS is the one line said), then the threads, which
  // may warn about the BLAS.
  const std::string int8 = int8_detail();
  mtx::set_threads(0);
  const mtx::RuntimeInfo r = mtx::runtime_info();
  std::string s = "mtx " + r.mtx_version + "\n";
  s += "LibTorch " + r.torch_version + "\n";
  s += "BLAS: " + r.blas + (r.blas_is_reference ? "  <-- slow, install libopenblas0-openmp" : "") + "\n";
  s += "allocator: " + r.allocator + "\n";
  s += std::string("CPU inference: float on ") +
       (mtx::model::fp32::PackedLinear::available()
            ? std::string("mtx's ") + mtx::model::fp32::PackedLinear::kernel() + " kernel (packed weights)"
            : std::string("the BLAS")) +
       ", int8 on " + (mtx::model::int8::engine().empty() ? "nothing (no engine)" : mtx::model::int8::engine()) + int8 +
       "\n";
  s += std::string("CPU ISA: ") + mtx::cpu::name(mtx::cpu::isa()) +
       (mtx::cpu::capped()
            ? std::string(" (capped by MTX_CPU_ISA; detected ") + mtx::cpu::name(mtx::cpu::detected()) + ")"
            : std::string()) +
       "\n";
  s += "CUDA: " + mtx::cuda_summary(r.cuda) + "\n";
  s += "threads: " + std::to_string(r.threads) + "\n";
  return s;
}

// First line of a (possibly multi-line, stack-traced) message.
std::string first_line(const std::string& s) {
  const size_t nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

}  // namespace

int main(int argc, char** argv) {
  mtx::select_blas_kernels(argv);  // may re-execute mtx once, before anything has run
  mtx::cli::set_program_args(argc, argv);
  CLI::App app{"mtx -- Transformer machine translation in C++ (train, translate, eval)", "mtx"};
  app.require_subcommand(0, 1);
  app.set_help_all_flag("--help-all", "Show the help of every subcommand");
  bool show_version = false;
  std::string log_level = "info";
  app.add_flag("--version", show_version, "Print mtx, LibTorch and BLAS versions and CUDA availability");
  app.add_option("--log-level", log_level, "debug|info|warn|error|off")->capture_default_str();

  const std::vector<mtx::cli::Command> commands = {
      mtx::cli::add_train(app),    mtx::cli::add_translate(app), mtx::cli::add_eval(app),   mtx::cli::add_prepare(app),
      mtx::cli::add_info(app),     mtx::cli::add_average(app),   mtx::cli::add_plot(app),   mtx::cli::add_generate(app),
      mtx::cli::add_quantize(app), mtx::cli::add_export(app),    mtx::cli::add_import(app), mtx::cli::add_serve(app),
      mtx::cli::add_score(app),    mtx::cli::add_detect(app)};

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : mtx::kExitUsage;
  }

  try {
    mtx::log::set_level(mtx::log::parse_level(log_level));
    if (show_version) {
      std::cout << version_text();
      return 0;
    }
    for (const auto& cmd : commands) {
      if (cmd.app->parsed()) {
        return cmd.run();
      }
    }
    std::cout << app.help();
    return mtx::kExitUsage;
  } catch (const mtx::Error& e) {
    std::fprintf(stderr, "%smtx: error: %s\n", mtx::log::prefix().c_str(), first_line(e.what()).c_str());
    return e.exit_code();
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "%smtx: error: %s\n", mtx::log::prefix().c_str(),
                 first_line(e.what_without_backtrace()).c_str());
    return mtx::kExitFailure;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%smtx: error: %s\n", mtx::log::prefix().c_str(), first_line(e.what()).c_str());
    return mtx::kExitFailure;
  }
}
