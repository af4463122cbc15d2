#include "harness/cli/cli.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <new>

#include <CLI/CLI.hpp>

#include "collectives/runtime.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "collectives/exit_signals.hpp"
#include "harness/cli/help_format.hpp"
#include "harness/cli/timeout_option.hpp"
#include "harness/cli/inject_option.hpp"

namespace shardlab {

struct Cli::Impl {
  CLI::App app;
  std::string line_axis;  // mesh_follows_processes
  Impl(const std::string& name, const std::string& description) : app(description, name) {}
};

Cli::Cli(const std::string& name, const std::string& description, const std::string& default_mesh)
    : impl_(std::make_unique<Impl>(name, description)) {
  hold_standard_streams();
  exit_on_signals();
  common.mesh = default_mesh;
  auto& app = impl_->app;
  app.formatter(wrapping_formatter());
  app.add_option("--mesh", common.mesh, "device mesh as named axes and their sizes, like " + default_mesh +
                                            " (device ids row-major)")
      ->capture_default_str();
  app.add_option("--backend", common.backend, "sim (threads, default) or mpi (run under mpiexec)")
      ->capture_default_str();
  app.add_option("--collectives", common.collectives, "ring (ours) or native (MPICH's own; mpi backend)")
      ->capture_default_str();
  app.add_option("--seed", common.seed, "seed for generated inputs")->capture_default_str();
  app.add_option("--dtype", common.dtype, "element type stored and moved: float32, float64 or bfloat16")
      ->capture_default_str();
  app.add_flag("--json", common.json, "print one JSON object instead of the text report");
  app.add_flag("--quiet", common.quiet, "print only the verdict line");
  app.add_option("--trace", common.trace, "also write the run's timeline here (Chrome Trace JSON; open in ui.perfetto.dev)");
  add_inject_option(&app, common);
  add_collective_timeout(&app, common.collective_timeout);
}

Cli::~Cli() = default;

void Cli::option(const std::string& flags, std::string& target, const std::string& help) {
  impl_->app.add_option(flags, target, help)->capture_default_str();
}

void Cli::option(const std::string& flags, int& target, const std::string& help) {
  impl_->app.add_option(flags, target, help)->capture_default_str();
}

void Cli::mesh_follows_processes(const std::string& axis) { impl_->line_axis = axis; }

void Cli::uneven_option() { add_uneven_option(&impl_->app, common.uneven); }

void Cli::inputs_option() {
  impl_->app.add_option("--inputs", common.inputs,
                        "read the lesson's input tensors that this .npz or folder of NAME.npy names (float16, bfloat16, "
                        "float32, float64) from it; the rest are generated as without it");
}

void Cli::flag(const std::string& flags, bool& target, const std::string& help) {
  impl_->app.add_flag(flags, target, help);
}

int Cli::parse(int argc, char** argv) {
  try {
    impl_->app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    if (process_is_root()) std::cout << impl_->app.help();
    return checked_stdout(0);
  } catch (const CLI::ParseError& e) {
    if (process_is_root()) std::cerr << impl_->app.get_name() << ": " << e.what() << " (see --help)\n";
    return 2;
  }
  if (const int status = refuse_bad_values(impl_->app, impl_->app.get_name()); status >= 0) return status;
  if (!impl_->line_axis.empty() && impl_->app.count("--mesh") == 0 && line_devices(common, 0) > 0)
    common.mesh = impl_->line_axis + "=" + std::to_string(line_devices(common, 0));
  if (common.collectives != "ring" && common.collectives != "native") {
    if (process_is_root())
      std::cerr << impl_->app.get_name() << ": --collectives is '" << common.collectives
                << "'; use ring or native\n";
    return 2;
  }
  return -1;
}

namespace {
// What a typed value must look like, by CLI11's type name for the option: CLI11 2.1 reads integers
// with strtoull/strtoll in base 0, so "-1" wraps to 2^64-1, "1e30" stops short, "010" is octal and
// an overflow saturates, reads reals with strtod, so "0x10" is 16, and takes an empty string as a
// value. Every number is held to number_syntax instead. Returns the reason, or "".
std::string bad_value(const std::string& type, const std::string& v) {
  if (v.find_first_not_of(" \t") == std::string::npos) return "is empty; give a value";
  const bool uint = type.rfind("UINT", 0) == 0, sint = !uint && type.rfind("INT", 0) == 0;
  if (uint || sint) {
    if (v[0] == '-' && uint) return "is '" + v + "'; it cannot be negative";
    const std::size_t sign = v[0] == '-' && sint ? 1 : 0;
    if (const std::string why = number_syntax(v.substr(sign), true); !why.empty()) return "is '" + v + "'; " + why;
    errno = 0;
    if (uint) std::strtoull(v.c_str(), nullptr, 10);
    else std::strtoll(v.c_str(), nullptr, 10);
    if (errno == ERANGE) return "is '" + v + "'; it does not fit in " + (uint ? "64 bits" : "a signed 64-bit integer");
  }
  if (type.rfind("FLOAT", 0) == 0) {
    try {
      parse_real(v, "");
    } catch (const Error& e) {
      return std::string(e.what()).substr(1);  // "is '...'; why"
    }
  }
  return "";
}
}  // namespace

int refuse_bad_values(const CLI::App& app, const std::string& program) {
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->count() == 0 || opt->get_type_size() == 0) continue;  // not given, or a flag
    for (const std::string& v : opt->results()) {
      const std::string why = bad_value(opt->get_type_name(), v);
      if (why.empty()) continue;
      if (process_is_root()) std::cerr << program << ": " << opt->get_name() << " " << why << " (see --help)\n";
      return 2;
    }
  }
  // --collectives native is MPICH's own: refused before any output when the backend is not mpi.
  const CLI::Option* native = app.get_option_no_throw("--collectives");
  const CLI::Option* backend = app.get_option_no_throw("--backend");
  if (native && native->count() && native->results().back() == "native" &&
      (!backend || !backend->count() || backend->results().back() != "mpi")) {
    if (process_is_root())
      std::cerr << program << ": --collectives native runs MPICH's own collectives, so it needs --backend mpi under mpiexec\n";
    return 2;
  }
  for (const CLI::App* sub : app.get_subcommands())  // the chosen ones
    if (const int status = refuse_bad_values(*sub, program); status >= 0) return status;
  return -1;
}

void at_least(CLI::Option* option, long lo) { within(option, lo, std::numeric_limits<long>::max()); }

void within(CLI::Option* option, long lo, long hi) {
  option->check(CLI::Validator(
      [lo, hi](std::string& v) {
        const std::size_t sign = !v.empty() && v[0] == '-' ? 1 : 0;
        if (const std::string why = number_syntax(v.substr(sign), true); !why.empty()) return "is '" + v + "'; " + why;
        char* end = nullptr;
        const long n = std::strtol(v.c_str(), &end, 10);  // out of range: LONG_MIN or LONG_MAX
        if (v.empty() || *end != '\0' || n < lo) return "is '" + v + "'; give at least " + std::to_string(lo);
        return n <= hi ? std::string() : "is '" + v + "'; give at most " + std::to_string(hi);
      },
      hi == std::numeric_limits<long>::max() ? ">=" + std::to_string(lo)
                                             : std::to_string(lo) + ".." + std::to_string(hi)));
}

void add_run_options(CLI::App* c, CommonOptions& common, const std::string& processes) {
  add_collective_timeout(c, common.collective_timeout);
  c->add_option("--backend", common.backend, "sim (threads, default) or mpi (mpiexec -n " + processes + ")")
      ->capture_default_str();
  c->add_option("--seed", common.seed, "seed for generated inputs")->capture_default_str();
  c->add_option("--dtype", common.dtype, "element type moved: float32, float64 or bfloat16")->capture_default_str();
  c->add_flag("--json", common.json, "print one JSON object instead of the text report");
  c->add_flag("--quiet", common.quiet, "print only the verdict line");
  c->add_option("--trace", common.trace, "also write the run's timeline here (Chrome Trace JSON; open in ui.perfetto.dev)");
  add_inject_option(c, common);
}

void add_uneven_option(CLI::App* c, std::string& uneven) {
  uneven = "chunk";
  c->add_option("--uneven", uneven,
                "a dim that does not divide its mesh axes: chunk (blocks of ceil(d/n), the last shorter, as "
                "torch.chunk), pad (each ceil(d/n), zero-padded, as JAX) or none (refuse it)")
      ->capture_default_str();
}

int line_devices(const CommonOptions& common, int fallback) {
  const int processes = common.backend == "mpi" ? launched_processes() : 0;
  return processes > 0 ? processes : fallback;
}

namespace {
// One line whatever the message quotes (a case name with a newline, an escape sequence): control
// characters are shown escaped, never sent to the terminal.
std::string one_line(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '\n') out += "\\n";
    else if (c < 0x20 || c == 0x7f) out += "\\x" + std::string(1, "0123456789abcdef"[c >> 4]) + "0123456789abcdef"[c & 15];
    else out += static_cast<char>(c);
  }
  return out;
}
}  // namespace

void hold_standard_streams() {
  for (int fd = 0; fd <= 2; ++fd)
    if (::fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      const int held = ::open("/dev/null", O_RDONLY);
      if (held >= 0 && held != fd) {
        ::dup2(held, fd);
        ::close(held);
      }
    }
}

int checked_stdout(int status) {
  static bool said = false;  // once, though guarded() may nest
  errno = 0;
  std::cout.flush();  // through stdio's buffer (cout is synced with it): its failure sets errno
  int why = errno;
  const bool flushed = std::fflush(stdout) == 0;
  if (why == 0) why = errno;
  if (std::cout.good() && flushed && !std::ferror(stdout)) return status;
  if (!said)
    std::cerr << "error: standard output could not be written" << (why ? std::string(" (") + std::strerror(why) + ")" : "")
              << ", so the report is lost; give it a writable place\n";
  said = true;
  return 3;
}

int guarded(const std::function<int()>& body) {
  return checked_stdout([&] {
    try {
      return body();
    } catch (const Error& e) {
      if (process_is_root()) std::cerr << "error: " << one_line(e.what()) << "\n";
      return e.kind() == ErrorKind::fault ? 3 : 2;
    } catch (const std::bad_alloc&) {
      if (process_is_root())
        std::cerr << "error: out of memory: this run needs more memory than the machine could give; give smaller sizes\n";
      return 2;
    } catch (const std::exception& e) {
      if (process_is_root()) std::cerr << "error: " << one_line(e.what()) << "\n";
      return 2;
    }
  }());
}

}  // namespace shardlab
